"""The checks the Airflow DAGs run, as a tiny CLI of the main environment (Airflow has its own venv).

``python -m batch.airflow_tasks check --datasource D --interval I`` — exit 0 when every chunk of the
interval is closed (window period passed, archiver watermark past end + windowPeriod), 75 (EX_TEMPFAIL,
"poke again") when not or when the metadata store does not answer, with the reason on stdout; 2 on bad input.

``python -m batch.airflow_tasks verify --datasource D --interval I --since ISO`` — exit 0 when every chunk
is served by a version at or after ``since`` (published by this run) and nothing older shows through;
1 otherwise, naming the chunk and the version serving it.

``python -m batch.airflow_tasks druid --datasource D --interval I`` — the DAG's ``druid`` task: re-index the
rebuilt chunks in the Druid cluster of the ``druid:`` settings and wait until its broker serves them
(:mod:`radstack.druid_cluster.reindex`); exit 0 at once for a datasource Druid does not serve, 1 when Druid
did not take it (the task's retries try again). ``verify`` then checks Druid's timeline too.

``python -m batch.airflow_tasks supervised`` — the datasource specs of the supervisors posted to the
Overlord API, as JSON: the DAG file makes their rebuild DAGs from it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from batch.backfill import visible
from batch.planning import BackfillPlanError, parse_interval, plan_chunks
from batch.rebuild_job import closed_checks
from radstack.config import load_settings
from radstack.druid_cluster.reindex import DruidReindexError, druid_problems, reindex
from radstack.druid_cluster.submit import DruidApiError
from radstack.storage.deep_storage import open_deep_storage
from radstack.storage.metadata import MetadataStore
from radstack.storage.supervisors import datasource_spec, load_supervisors
from radstack.time.intervals import Interval, condense, format_instant, parse_instant

EX_TEMPFAIL = 75

__all__ = ["check", "verify", "druid", "main", "EX_TEMPFAIL"]


def check(settings, datasource: str, interval: Interval) -> tuple[bool, str]:  # type: ignore[no-untyped-def]

    spec = datasource_spec(settings, datasource)
    chunks = plan_chunks(interval, spec.data_schema.segment_granularity)
    with MetadataStore.from_settings(settings) as md:
        checks = closed_checks(md, spec, chunks)
    bad = [c.reason for c in checks if not c.closed]
    return (not bad), ("; ".join(bad) if bad else f"{interval.iso()}: closed")


def supervised_datasources(settings) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Datasource → the spec (JSON) of every supervisor posted to the Overlord API. The DAG file reads
    these through this command: Airflow's virtualenv has no driver for the metadata store."""
    try:
        with MetadataStore.from_settings(settings, create=False) as md:
            return {rec.id: rec.datasource for rec in load_supervisors(md).values()}
    except SQLAlchemyError:
        return {}


def verify(settings, datasource: str, interval: Interval, since_ms: int) -> tuple[bool, str]:  # type: ignore[no-untyped-def]

    spec = datasource_spec(settings, datasource)
    since = format_instant(since_ms)
    problems = []
    with MetadataStore.from_settings(settings) as md:
        for chunk in plan_chunks(interval, spec.data_schema.segment_granularity):
            segs = visible(md, datasource, chunk)
            covered = sum(iv.duration_ms for iv in condense([part for _, part in segs]))
            old = sorted({s.version for s, _ in segs if s.version < since})
            if old:
                problems.append(f"{chunk.iso()} is still served by version(s) {', '.join(old)} (older than {since})")
            elif covered != chunk.end - chunk.start:
                problems.append(f"{chunk.iso()} is not fully covered by a new version")
        if settings.druid.serves(datasource):
            problems += _verify_druid(settings, spec, interval, md)
    return (not problems), ("; ".join(problems) or f"{interval.iso()}: served by versions >= {since}"
                            + (", in Druid too" if settings.druid.serves(datasource) else ""))


def _verify_druid(settings, spec, interval: Interval, md: MetadataStore) -> list[str]:  # type: ignore[no-untyped-def]
    try:
        return druid_problems(settings, md, spec, interval)
    except DruidApiError as e:
        return [f"Druid: {e}"]


def druid(settings, datasource: str, interval: Interval, started_by: str) -> tuple[bool, str]:  # type: ignore[no-untyped-def]
    """The DAG's ``druid`` task: re-index the rebuilt chunks in the Druid cluster (nothing to do when
    ``druid.datasources`` does not name the datasource)."""
    if not settings.druid.serves(datasource):
        return True, f"{datasource}: no Druid cluster serves it (druid.datasources); nothing to do"
    with MetadataStore.from_settings(settings) as md:
        spec = datasource_spec(settings, datasource, md)
        try:
            res = reindex(settings, md, open_deep_storage(settings), spec, interval, started_by=started_by,
                          note=lambda line: print(line, flush=True))
        except DruidReindexError as e:
            return False, str(e)
    return True, json.dumps(res.to_json())


def main(argv: list[str] | None = None) -> int:

    p = argparse.ArgumentParser(prog="python -m batch.airflow_tasks")
    sub = p.add_subparsers(dest="cmd", required=True)
    cat = sub.add_parser("supervised", help="the supervisors' datasource specs as JSON (for the DAG file)")
    cat.add_argument("--config", default=None)
    for name in ("check", "verify", "druid"):
        s = sub.add_parser(name)
        s.add_argument("--datasource", required=True)
        s.add_argument("--interval", required=True)
        s.add_argument("--config", default=None)
        if name == "verify":
            s.add_argument("--since", required=True, help="ISO instant: the DAG run's start")
        if name == "druid":
            s.add_argument("--started-by", default="airflow")
    a = p.parse_args(argv)
    try:
        settings = load_settings(a.config)
        if a.cmd == "supervised":
            print(json.dumps(supervised_datasources(settings)))
            return 0
        interval = parse_interval(a.interval)
        if a.cmd == "check":
            try:
                ok, msg = check(settings, a.datasource, interval)
            except SQLAlchemyError as e:  # the store locked or unreachable for now: the sensor pokes again
                ok, msg = False, f"the metadata store did not answer: {type(e).__name__}: {str(e)[:300]}"
            print(msg)
            return 0 if ok else EX_TEMPFAIL
        if a.cmd == "druid":
            ok, msg = druid(settings, a.datasource, interval, a.started_by)
            print(msg)
            return 0 if ok else 1
        ok, msg = verify(settings, a.datasource, interval, parse_instant(a.since))
        print(msg)
        return 0 if ok else 1
    except (BackfillPlanError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
