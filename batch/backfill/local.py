"""Rebuild a plan with local Spark: one job, one version and one atomic publish per group of consecutive
chunks, and the re-index in the Druid cluster that serves the datasource, when one does."""

from __future__ import annotations

import time
from typing import Any

from batch.backfill.plan import (
    BackfillPlan,
    ChunkResult,
    Progress,
    check_plan_closed,
    chunks_per_job,
    job_groups,
)
from batch.backfill.summaries import chunk_summaries
from batch.rebuild_job import rebuild
from batch.rebuild_tasks import RebuildTask
from radstack.config import Settings
from radstack.druid_cluster.reindex import DruidReindexError, reindex
from radstack.storage.deep_storage import open_deep_storage
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.metadata import MetadataStore
from radstack.storage.supervisors import datasource_catalog
from radstack.time.intervals import Interval


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
                for group in job_groups(chunks, size, spec.data_schema.segment_granularity):
                    whole = Interval(group[0].start, group[-1].end)
                    batch = [ChunkResult(ds, c, status="running", group=whole, group_chunks=len(group)) for c in group]
                    for res, before in zip(batch, chunk_summaries(md, storage, spec, group), strict=True):
                        res.before_rows, res.before_events, res.before_versions = before
                        if progress:
                            progress(res)
                    t0 = time.monotonic()
                    status, error, stages, ran_on = "published", "", {}, ""
                    task.line(f"rebuilding {whole.iso()} ({len(group):,} chunk(s)) in one Spark job")
                    try:
                        done = rebuild(settings, ds, whole, spark=spark, force=True, metadata=md, deep_storage=storage)
                        stages, ran_on = done.stages, done.spark
                    except Exception as e:  # noqa: BLE001 - reported for the group's chunks; the next group still runs
                        status, error = "failed", f"{type(e).__name__}: {e}"
                        task.failure(e)
                    seconds = time.monotonic() - t0
                    for res, (rows, events, versions) in zip(batch, chunk_summaries(md, storage, spec, group), strict=True):
                        res.status, res.error, res.seconds, res.stages, res.spark = status, error, seconds, stages, ran_on
                        res.rows, res.events = rows, events
                        res.version = ", ".join(versions)  # after a publish: the group's one new version
                        results.append(res)
                        if progress:
                            progress(res)
                    if status == "published":
                        task.line(f"published {whole.iso()} as version {batch[0].version} in {seconds:.1f} s"
                                  + (" on the warm Spark" if ran_on == "connect" else "") + " ("
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


