"""``radctl backfill``: plan an interval into chunks, rebuild them locally or through Airflow, summarise.

- :func:`plan_backfill` — datasources × segment-granularity chunks, with clear errors for a bad interval
  or an unknown datasource (:class:`BackfillError`);
- :func:`run_local` — local Spark rebuilds of runs of consecutive chunks (:func:`group_chunks`, at most
  ``batch.chunks_per_job`` chunks each): one Spark job, one version and one atomic publish per group
  (tombstones for its chunks without data), results still per chunk (closedness is checked for every
  chunk before any work starts, unless ``force``);
- :func:`run_airflow` — one DAG run per chunk through Airflow 3's REST API (``POST
  /api/v2/dags/{dag}/dagRuns`` with ``conf {"interval": …}``), optionally waiting for them;
- :func:`chunk_summary` / :func:`chunk_summaries` — for a chunk (or a run of chunks, with one metadata
  query and one read per data segment), rows and events (the sum of the count metric) of what served it
  before (the real-time data, on a first rebuild) and of what serves it now, and the version now
  serving it; tombstones and chunks without segments cost no deep-storage read.
"""

from __future__ import annotations

import bisect
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from batch.airflow_api import AirflowClient, AirflowError, dag_id
from batch.planning import BackfillPlanError, NotClosedError, parse_interval, plan_chunks
from batch.rebuild_job import closed_checks, rebuild
from batch.rebuild_tasks import RebuildTask
from radstack.config import Settings
from radstack.druid_cluster.reindex import DruidReindexError, reindex
from radstack.spec import SpecError
from radstack.storage.deep_storage import open_deep_storage
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.metadata import MetadataStore
from radstack.storage.segment_format import segment_data_key
from radstack.storage.supervisors import datasource_catalog
from radstack.storage.timeline import VersionedIntervalTimeline
from radstack.time.clock import now_millis
from radstack.time.intervals import Interval, format_instant

__all__ = [
    "BackfillError",
    "BackfillPlan",
    "ChunkResult",
    "plan_backfill",
    "run_local",
    "run_airflow",
    "chunk_summary",
    "chunk_summaries",
    "group_chunks",
]


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


def _count_metric(spec: Any) -> str | None:
    return next((m.name for m in spec.data_schema.metrics if m.type == "count"), None)


def _segment_times(deep_storage: DeepStorage, seg: Any, count_metric: str | None, tmp: str, i: int) -> tuple[Any, Any]:
    """(``__time`` in ms, events per row) of a data segment's file, as int64 numpy arrays sorted by time."""


    spec = seg.load_spec or {}
    if spec.get("type") == "local" and Path(str(spec.get("path", ""))).is_file():
        path = Path(str(spec["path"]))
    else:
        path = Path(tmp) / f"{i}.parquet"
        try:
            key = deep_storage.key_for_load_spec(spec)
        except Exception:  # noqa: BLE001 - a load spec from elsewhere: the default layout
            key = segment_data_key(seg.id)
        deep_storage.download(key, path)
    cols = ["__time"] + ([count_metric] if count_metric and count_metric in seg.metrics else [])
    t = pq.read_table(path, columns=cols)
    col = t.column("__time")
    if pa.types.is_timestamp(col.type):
        col = pc.cast(pc.cast(col, pa.timestamp("ms"), safe=False), pa.int64())
    ms = np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.int64)
    if len(cols) > 1:
        events = np.asarray(pc.fill_null(t.column(count_metric), 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    else:
        events = np.ones(len(ms), dtype=np.int64)
    order = np.argsort(ms, kind="stable")
    return ms[order], events[order]


def visible(metadata: MetadataStore, datasource: str, chunk: Interval) -> list[tuple[Any, Interval]]:
    """(segment, visible part) pairs serving ``chunk`` now, per the timeline of used segments."""

    tl = VersionedIntervalTimeline.from_segments(metadata.segments(datasource, used=True, interval=chunk), datasource)
    return [(v.segment, v.interval) for v in tl.visible_segments(chunk, include_tombstones=True)]


def chunk_summaries(
    metadata: MetadataStore, deep_storage: DeepStorage, spec: Any, chunks: Sequence[Interval]
) -> list[tuple[int, int, list[str]]]:
    """:func:`chunk_summary` of each of ``chunks`` (time-ordered, not overlapping): one timeline lookup
    over the whole run and one read per visible data segment, split per chunk; tombstones and chunks
    without segments cost no deep-storage read."""

    n = len(chunks)
    if not n:
        return []
    cm = _count_metric(spec)
    rows = [0] * n
    events = [0] * n
    versions: list[set[str]] = [set() for _ in range(n)]
    starts = [c.start for c in chunks]
    pieces = visible(metadata, spec.name, Interval(chunks[0].start, chunks[-1].end))
    with tempfile.TemporaryDirectory(prefix="radstack-summary-") as tmp:
        for k, (seg, part) in enumerate(pieces):
            hit = []
            for i in range(max(0, bisect.bisect_right(starts, part.start) - 1), n):
                if chunks[i].start >= part.end:
                    break
                if chunks[i].end > part.start:
                    hit.append(i)
            if not hit:
                continue
            for i in hit:
                versions[i].add(seg.version)
            if seg.is_tombstone:
                continue
            ms, ev = _segment_times(deep_storage, seg, cm, tmp, k)
            cum = np.concatenate(([0], np.cumsum(ev)))
            for i in hit:
                lo, hi = max(part.start, chunks[i].start), min(part.end, chunks[i].end)
                a, b = (int(x) for x in np.searchsorted(ms, [lo, hi], side="left"))
                rows[i] += b - a
                events[i] += int(cum[b] - cum[a])
    return [(rows[i], events[i], sorted(versions[i])) for i in range(n)]


def chunk_summary(metadata: MetadataStore, deep_storage: DeepStorage, spec: Any, chunk: Interval) -> tuple[int, int, list[str]]:
    """(rows, events, versions) of what serves ``chunk`` now."""
    return chunk_summaries(metadata, deep_storage, spec, [chunk])[0]


# ---- local ---------------------------------------------------------------------------------------


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


def _job_groups(chunks: Sequence[Interval], size: int, granularity: Any) -> list[list[Interval]]:
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


def run_local(
    settings: Settings,
    plan: BackfillPlan,
    *,
    force: bool = False,
    progress: Progress | None = None,
    spark: Any | None = None,
    now_ms: int | None = None,
    started_by: str = "radctl backfill",
    task_id: str | None = None,
    druid: bool = True,
) -> list[ChunkResult]:
    """Rebuild every chunk with local Spark: one job, one version and one atomic publish per group of
    at most ``batch.chunks_per_job`` consecutive chunks (:func:`group_chunks`); a failed group marks
    its chunks failed and the next group still runs. Returns one :class:`ChunkResult` per chunk (the
    chunks of a group share status, error, seconds and, once published, the version); ``progress`` is called for every
    chunk as its group starts (``running``) and ends (``published``/``failed``). Each datasource's
    rebuild is recorded as a task (:mod:`batch.rebuild_tasks`; ``task_id``: a row made already, by the
    console's backfill button). With ``druid`` (the default), a datasource the Druid cluster of the
    settings serves has each published group re-indexed there (:mod:`radstack.druid_cluster.reindex`)
    before the next group starts; the Airflow DAG turns it off and runs that step as its own task."""

    if not force:
        check_plan_closed(settings, plan, now_ms=now_ms)
    storage = open_deep_storage(settings)
    size = chunks_per_job(settings)
    results: list[ChunkResult] = []
    with MetadataStore.from_settings(settings) as md:
        catalog = datasource_catalog(settings, md)
        for ds, chunks in plan.chunks.items():
            spec = catalog[ds]
            task = RebuildTask(settings, md, ds, Interval(chunks[0].start, chunks[-1].end), chunks=len(chunks),
                               force=force, started_by=started_by, task_id=task_id)
            first = len(results)
            try:
                for group in _job_groups(chunks, size, spec.data_schema.segment_granularity):
                    whole = Interval(group[0].start, group[-1].end)
                    batch = [ChunkResult(ds, c, status="running", group=whole, group_chunks=len(group)) for c in group]
                    for res, before in zip(batch, chunk_summaries(md, storage, spec, group), strict=True):
                        res.before_rows, res.before_events, res.before_versions = before
                        if progress:
                            progress(res)
                    t0 = time.monotonic()
                    status, error, stages = "published", "", {}
                    task.line(f"rebuilding {whole.iso()} ({len(group):,} chunk(s)) in one Spark job")
                    try:
                        stages = rebuild(settings, ds, whole, spark=spark, force=True, metadata=md, deep_storage=storage).stages
                    except Exception as e:  # noqa: BLE001 - reported for the group's chunks; the next group still runs
                        status, error = "failed", f"{type(e).__name__}: {e}"
                        task.failure(e)
                    seconds = time.monotonic() - t0
                    for res, (rows, events, versions) in zip(batch, chunk_summaries(md, storage, spec, group), strict=True):
                        res.status, res.error, res.seconds, res.stages = status, error, seconds, stages
                        res.rows, res.events = rows, events
                        res.version = ", ".join(versions)  # after a publish: the group's one new version
                        results.append(res)
                        if progress:
                            progress(res)
                    if status == "published":
                        task.line(f"published {whole.iso()} as version {batch[0].version} in {seconds:.1f} s ("
                                  + ", ".join(f"{k} {v:.1f} s" for k, v in stages.items()) + ")")
                        if druid and settings.druid.serves(ds):
                            _to_druid(settings, md, storage, spec, whole, batch, task, started_by, progress)
            except BaseException as e:  # the task must not stay RUNNING when something else fails
                task.failure(e)
                task.finish_chunks([*(r.to_json() for r in results[first:]), {"status": "failed", "error": f"{type(e).__name__}: {e}"}])
                raise
            task.finish_chunks([r.to_json() for r in results[first:]])
    return results


def _to_druid(settings: Settings, md: MetadataStore, storage: DeepStorage, spec: Any, whole: Interval,
              batch: list[ChunkResult], task: RebuildTask, started_by: str, progress: Progress | None) -> None:
    """The group's re-index in the Druid cluster; its outcome goes into the group's chunk results."""
    task.line(f"re-indexing {whole.iso()} in Druid ({settings.druid.overlord_url})")
    t0 = time.monotonic()
    try:
        res = reindex(settings, md, storage, spec, whole, started_by=started_by, note=task.line)
        version, error = res.druid_version, ""
    except DruidReindexError as e:
        version, error = "", str(e)
        task.line(f"Druid did not take {whole.iso()}: {e} (radstack serves it; the server's druid_sync duty retries)")
    for r in batch:
        r.druid_version, r.druid_error, r.druid_seconds = version, error, time.monotonic() - t0
    if progress:
        progress(batch[0])


# ---- Airflow -----------------------------------------------------------------------------------


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
        before = _before_summaries(settings, plan) if wait else {}
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


def _before_summaries(settings: Settings, plan: BackfillPlan) -> dict[tuple[str, Interval], tuple[int, int, list[str]]]:

    storage = open_deep_storage(settings)
    with MetadataStore.from_settings(settings) as md:
        catalog = datasource_catalog(settings, md)
        return {
            (ds, c): chunk_summary(md, storage, catalog[ds], c) for ds, chunks in plan.chunks.items() for c in chunks
        }


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
