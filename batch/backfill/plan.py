"""A backfill's plan: datasources × segment-granularity chunks of an interval (:func:`plan_backfill`),
whether they are closed (:func:`check_plan_closed`), how they group into Spark jobs (:func:`group_chunks`),
and what each chunk's rebuild came to (:class:`ChunkResult`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from batch.planning import BackfillPlanError, NotClosedError, parse_interval, plan_chunks
from batch.rebuild_job import closed_checks
from radstack.config import Settings
from radstack.spec import SpecError
from radstack.storage.metadata import MetadataStore
from radstack.storage.supervisors import datasource_catalog
from radstack.time.intervals import Interval


class BackfillError(RuntimeError):
    """Something the user must fix (bad interval, unknown datasource, Airflow unreachable)."""


@dataclass
class BackfillPlan:
    interval: Interval
    chunks: dict[str, list[Interval]]  # datasource → chunks

    @property
    def total(self) -> int:
        return sum(len(c) for c in self.chunks.values())


@dataclass
class ChunkResult:
    datasource: str
    interval: Interval
    status: str = "pending"  # published | failed | triggered | queued | running | success
    before_rows: int = 0
    before_events: int = 0
    before_versions: list[str] = field(default_factory=list)
    rows: int = 0
    events: int = 0
    version: str = ""  # the version now serving the chunk
    error: str = ""
    run_id: str = ""
    seconds: float = 0.0  # local: the wall time of the group's rebuild (shared by its chunks)
    group: Interval | None = None  # local: the interval the Spark job rebuilt (this chunk's group)
    group_chunks: int = 1  # local: how many chunks that job rebuilt
    stages: dict[str, float] = field(default_factory=dict)  # local: the group's rebuild, seconds per step
    spark: str = ""  # local: what ran it, "connect" (the warm Spark) or "local" (its own Spark)
    druid_version: str = ""  # local, a datasource a Druid cluster serves: the version Druid now serves
    druid_error: str = ""  # … or why Druid did not take the rebuild (radstack serves it all the same)
    druid_seconds: float = 0.0  # the re-index, from submission to Druid's broker serving it

    def to_json(self) -> dict[str, Any]:
        return {
            "datasource": self.datasource,
            "interval": self.interval.iso(),
            "status": self.status,
            "realtime_rows": self.before_rows,
            "realtime_events": self.before_events,
            "realtime_versions": self.before_versions,
            "batch_rows": self.rows,
            "batch_events": self.events,
            "version": self.version,
            "error": self.error,
            "run_id": self.run_id,
            "seconds": round(self.seconds, 3),
            "group": self.group.iso() if self.group is not None else "",
            "stages": {k: round(v, 3) for k, v in self.stages.items()},
            **({"spark": self.spark} if self.spark else {}),
            **({"druid_version": self.druid_version, "druid_error": self.druid_error,
                "druid_seconds": round(self.druid_seconds, 3)} if self.druid_version or self.druid_error else {}),
        }


Progress = Callable[[ChunkResult], None]


# ---- planning ----------------------------------------------------------------------------------


def plan_backfill(settings: Settings, interval_text: str, datasource: str | None = None) -> BackfillPlan:

    try:
        interval = parse_interval(interval_text)
    except BackfillPlanError as e:
        raise BackfillError(str(e)) from e
    try:
        catalog = datasource_catalog(settings)
    except SpecError as e:
        raise BackfillError(f"cannot read the datasource specs: {e}") from e
    if datasource:
        if datasource not in catalog:
            known = ", ".join(sorted(catalog)) or "none"
            raise BackfillError(
                f"unknown datasource {datasource!r} (known: {known}; specs are read from {settings.datasources_dir})"
            )
        names = [datasource]
    else:
        names = sorted(n for n, s in catalog.items() if s.processing.topics)
        if not names:
            raise BackfillError(f"no datasource with processing.topics in {settings.datasources_dir} or a supervisor")
    chunks: dict[str, list[Interval]] = {}
    for n in names:
        try:
            chunks[n] = plan_chunks(interval, catalog[n].data_schema.segment_granularity)
        except BackfillPlanError as e:
            raise BackfillError(f"{n}: {e}") from e
    return BackfillPlan(interval, chunks)


# ---- summaries ---------------------------------------------------------------------------------


def check_plan_closed(settings: Settings, plan: BackfillPlan, *, now_ms: int | None = None) -> None:
    """Raise :class:`NotClosedError` naming every chunk that is not closed."""

    bad = []
    with MetadataStore.from_settings(settings) as md:
        catalog = datasource_catalog(settings, md)
        for ds, chunks in plan.chunks.items():
            bad += [c for c in closed_checks(md, catalog[ds], chunks, now_ms=now_ms) if not c.closed]
    if bad:
        raise NotClosedError(bad)


def group_chunks(chunks: Sequence[Interval], size: int) -> list[list[Interval]]:
    """``chunks`` (time-ordered) cut into runs of consecutive chunks (each starting where the previous
    one ends) of at most ``size`` chunks: what one local Spark job rebuilds."""
    size = max(1, int(size))
    groups: list[list[Interval]] = []
    for c in chunks:
        if groups and len(groups[-1]) < size and groups[-1][-1].end == c.start:
            groups[-1].append(c)
        else:
            groups.append([c])
    return groups


def job_groups(chunks: Sequence[Interval], size: int, granularity: Any) -> list[list[Interval]]:
    """:func:`group_chunks`, each group kept only if its whole interval plans to exactly its chunks
    (what :func:`batch.rebuild_job.rebuild` rebuilds), else split into single chunks."""
    out: list[list[Interval]] = []
    for g in group_chunks(chunks, size):
        if len(g) == 1 or plan_chunks(Interval(g[0].start, g[-1].end), granularity) == g:
            out.append(g)
        else:  # not expected for chunks from plan_chunks; never rebuild more than planned
            out += [[c] for c in g]
    return out


def chunks_per_job(settings: Settings) -> int:
    """``batch.chunks_per_job`` (at least 1)."""
    return max(1, int(settings.batch.chunks_per_job or 1))


