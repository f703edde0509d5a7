"""Druid's ``CompactSegments`` duty: the compaction pass over every configured datasource
(:mod:`radstack.storage.compaction` plans and runs each interval)."""

from __future__ import annotations

import logging

from radstack.config import Settings
from radstack.storage.compaction.config import STATE_KEY, load_compaction_configs
from radstack.storage.compaction.run import CompactionResult, SparkCompactor, compact_datasource
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.metadata import MetadataStore
from radstack.storage.task_records import TaskRecord
from radstack.time.clock import now_millis
from serving.coordinator.duties.base import Duty, DutyContext

log = logging.getLogger(__name__)


def compaction_duty(
    metadata: MetadataStore,
    deep_storage: DeepStorage,
    settings: Settings,
    *,
    now_ms: int | None = None,
    force: bool = False,
    spark_compactor: SparkCompactor | None = None,
) -> list[CompactionResult]:
    """The coordinator's compaction pass: every configured datasource, at most
    ``coordinator.compaction.max_intervals_per_run`` intervals each, once per
    ``coordinator.compaction.period_seconds``."""
    if not bool(settings.coordinator.compaction.on):
        return []
    configs = load_compaction_configs(metadata)
    if not configs:
        return []
    now = now_millis() if now_ms is None else now_ms
    period_ms = int(float(settings.coordinator.compaction.period_seconds or 0) * 1000)
    last = metadata.get_state(STATE_KEY)
    if not force and last is not None and now - int(last) < period_ms:
        return []
    metadata.put_state(STATE_KEY, now)
    max_n = int(settings.coordinator.compaction.max_intervals_per_run or 4)
    out: list[CompactionResult] = []
    for ds in sorted(configs):
        task: TaskRecord | None = None
        try:
            plans, _, _ = compact_datasource(metadata, deep_storage, configs[ds], settings=settings, now_ms=now,
                                             dry_run=True)
            if not plans:
                continue  # nothing to compact: no task
            # the pass over this datasource is a task, as Druid's coordinator issues compact tasks (#51)
            task = TaskRecord(settings, metadata, task_type="compact", datasource=ds, started_by="coordinator",
                              payload={"intervals": [p.interval.iso() for p in plans[:max_n]]})
            task.line(f"compaction of {ds}: {len(plans):,} interval(s) to compact, at most {max_n} this pass")
            _plans, results, errors = compact_datasource(
                metadata,
                deep_storage,
                configs[ds],
                settings=settings,
                now_ms=now,
                max_intervals=max_n,
                spark_compactor=spark_compactor,
                plans=plans,  # planned above, for the task record
            )
            for r in results:
                task.line(f"compacted {r.plan.interval.iso()}: {r.rows_in:,} → {r.rows_out:,} rows, version "
                          f"{r.version} ({r.runner})")
            for e in errors:
                task.line(f"error: {e}")
            task.finish(not errors, "; ".join(errors) or None, {"results": [r.to_json() for r in results],
                                                               "errors": errors})
            out += results
        except Exception as e:  # noqa: BLE001 - one datasource must not stop the others
            log.exception("compaction of %s failed", ds)
            if task is not None:
                task.failure(e)
                task.finish(False, f"{type(e).__name__}: {e}", {})
    return out


def _run(ctx: DutyContext) -> list[CompactionResult]:
    assert ctx.deep_storage is not None
    return compaction_duty(ctx.metadata, ctx.deep_storage, ctx.settings, now_ms=ctx.now_ms,
                           spark_compactor=ctx.spark_compactor)


DUTY = Duty("compaction", _run, needs_deep_storage=True)
