"""Rebuild a plan through Airflow: one DAG run per chunk (Airflow 3's REST API, ``conf {"interval": …}``),
optionally waiting for them."""

from __future__ import annotations

import time

from batch.airflow_api import AirflowClient, AirflowError, dag_id
from batch.backfill.plan import BackfillPlan, ChunkResult, Progress
from batch.backfill.summaries import before_summaries, chunk_summary
from radstack.config import Settings
from radstack.storage.deep_storage import open_deep_storage
from radstack.storage.metadata import MetadataStore
from radstack.storage.supervisors import datasource_catalog
from radstack.time.clock import now_millis
from radstack.time.intervals import format_instant


def run_airflow(
    settings: Settings,
    plan: BackfillPlan,
    *,
    wait: bool = False,
    force: bool = False,
    progress: Progress | None = None,
    poll_seconds: float = 2.0,
    client: AirflowClient | None = None,
) -> list[ChunkResult]:
    """Trigger one DAG run per chunk (conf ``{"interval", "force"}``); with ``wait``, poll them to the
    end and summarise from the metadata store."""
    url = str(settings.airflow.url or "")
    if client is None and not url:
        raise AirflowError("airflow.url is not set (RADSTACK_AIRFLOW__URL); use --via local")
    own = client is None
    cl = client or AirflowClient(url, str(settings.airflow.username or ""), str(settings.airflow.password or ""))
    results: list[ChunkResult] = []
    try:
        cl.health()
        before = before_summaries(settings, plan) if wait else {}
        stamp = format_instant(now_millis()).replace(":", "").replace("-", "")
        for ds, chunks in plan.chunks.items():
            dag = dag_id(settings, ds)
            cl.unpause(dag)
            for chunk in chunks:
                run_id = f"radctl__{chunk.iso().replace(':', '').replace('/', '_')}__{stamp}"
                cl.trigger(dag, {"interval": chunk.iso(), "force": force}, run_id)
                res = ChunkResult(ds, chunk, status="triggered", run_id=run_id)
                res.before_rows, res.before_events, res.before_versions = before.get((ds, chunk), (0, 0, []))
                results.append(res)
                if progress:
                    progress(res)
        if wait:
            _wait_airflow(settings, cl, results, progress, poll_seconds)
    finally:
        if own:
            cl.close()
    return results


def _wait_airflow(settings: Settings, cl: AirflowClient, results: list[ChunkResult], progress: Progress | None,
                  poll_seconds: float) -> None:  # fmt: skip

    deadline = time.monotonic() + float(settings.airflow.wait_timeout_seconds or 3600)
    pending = list(results)
    t0 = time.monotonic()
    while pending:
        if time.monotonic() > deadline:
            for r in pending:
                r.status, r.error = "timeout", "still running in Airflow when --wait gave up"
            break
        for r in list(pending):
            state = cl.run_state(dag_id(settings, r.datasource), r.run_id)
            if state in ("success", "failed"):
                r.status = state
                r.seconds = time.monotonic() - t0
                pending.remove(r)
            elif state != r.status:
                r.status = state
            if progress:
                progress(r)
        if pending:
            time.sleep(poll_seconds)
    storage = open_deep_storage(settings)
    with MetadataStore.from_settings(settings) as md:
        catalog = datasource_catalog(settings, md)
        for r in results:
            r.rows, r.events, versions = chunk_summary(md, storage, catalog[r.datasource], r.interval)
            r.version = ", ".join(versions)
            if r.status == "failed":
                r.error = f"DAG run {r.run_id} failed: see its task logs in the Airflow UI"
