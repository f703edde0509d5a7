"""Druid's ``compact`` task on the Overlord API: compacts the buckets inside one interval with the
engine of :mod:`radstack.storage.compaction`, run by :class:`serving.overlord.tasks.TaskRunner`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from radstack.storage.compaction import (
    CompactionConfig,
    CompactionError,
    choose_runner,
    load_compaction_configs,
    plan_compaction,
    run_compaction,
    window_period_of,
)
from radstack.storage.metadata import MetadataStore
from radstack.time.clock import now_millis
from radstack.time.intervals import Interval, Period, TimeParseError
from serving.overlord.cancel import TaskCancelled
from serving.overlord.task_spec import TaskSpecError, new_task_id
from serving.overlord.task_state import TaskHost, TaskState

__all__ = ["CompactTaskSpec", "parse_compact_task"]

@dataclass(frozen=True)
class CompactTaskSpec:
    """Druid's ``compact`` task, run by :class:`serving.overlord.tasks.TaskRunner` through :meth:`run`:
    compacts the buckets inside ``interval`` with the task's ``granularitySpec`` (or the stored config's
    tiers), no age or skip offset — but never what the streaming job can still write to."""

    id: str
    data_source: str
    interval: Interval
    payload: dict[str, Any]
    config_raw: dict[str, Any] | None
    runner_name: str | None = None
    type: str = "compact"
    max_parse_exceptions: int = 0
    max_saved_parse_exceptions: int = 0

    def config(self, metadata: MetadataStore) -> CompactionConfig:
        stored = load_compaction_configs(metadata).get(self.data_source)
        if self.config_raw is None:
            if stored is None:
                raise CompactionError(f"granularitySpec: required (datasource {self.data_source} has no "
                                      "compaction config to take it from)")
            return replace(stored, skip_offset=Period.parse("PT0S"))
        raw = dict(self.config_raw)
        if "metricsSpec" not in raw and stored is not None and stored.raw.get("metricsSpec") is not None:
            raw["metricsSpec"] = stored.raw["metricsSpec"]
        raw["skipOffsetFromLatest"] = "PT0S"
        return CompactionConfig.from_json(raw)

    def run(self, runner: TaskHost, state: TaskState) -> int:
        cfg = self.config(runner.metadata)
        now = now_millis()
        segments = runner.metadata.segments(self.data_source, used=True)
        plans = [p for p in plan_compaction(segments, cfg, now_ms=now,
                                            window_period=window_period_of(runner.settings, self.data_source))
                 if self.interval.contains(p.interval)]
        published = 0
        for plan in plans:
            if state.cancel.is_set():
                raise TaskCancelled()
            spark_compactor = runner.jobs.spark_compactor
            result = run_compaction(runner.metadata, runner.deep_storage, plan, cfg, settings=runner.settings,
                                    spark_compactor=spark_compactor,
                                    runner=choose_runner(runner.settings, plan, self.runner_name,
                                                         spark_available=spark_compactor is not None))
            published += len(result.segments)
        return published


def parse_compact_task(body: Any, now_ms: int) -> CompactTaskSpec:
    """``{"type": "compact", "dataSource", "ioConfig": {"type": "compact", "inputSpec": {"type":
    "interval", "interval"}}}`` (or the older top-level ``"interval"``), optional ``granularitySpec``,
    ``metricsSpec``, ``dimensionsSpec``, ``tuningConfig``; radstack: ``context.runner``."""

    if not isinstance(body, Mapping):
        raise TaskSpecError("", "the task must be a JSON object")
    ds = body.get("dataSource")
    if not isinstance(ds, str) or not ds.strip():
        raise TaskSpecError("dataSource", "required")
    io = body.get("ioConfig") or {}
    spec_in = io.get("inputSpec") if isinstance(io, Mapping) else None
    text = spec_in.get("interval") if isinstance(spec_in, Mapping) else body.get("interval")
    if isinstance(spec_in, Mapping) and spec_in.get("type", "interval") != "interval":
        raise TaskSpecError("ioConfig.inputSpec.type", "only 'interval' is supported")
    if not isinstance(text, str):
        raise TaskSpecError("ioConfig.inputSpec.interval", "required (an ISO interval)")
    try:
        interval = Interval.parse(text)
    except (TimeParseError, ValueError) as e:
        raise TaskSpecError("ioConfig.inputSpec.interval", str(e)) from e
    config_raw: dict[str, Any] | None = None
    if body.get("granularitySpec") is not None:
        config_raw = {k: body[k] for k in ("granularitySpec", "metricsSpec", "dimensionsSpec", "tuningConfig")
                      if body.get(k) is not None}
        config_raw["dataSource"] = ds
        try:
            CompactionConfig.from_json(config_raw)
        except CompactionError as e:
            raise TaskSpecError("", str(e)) from e
    runner_name = (body.get("context") or {}).get("runner") if isinstance(body.get("context"), Mapping) else None
    if runner_name not in (None, "auto", "inprocess", "spark"):
        raise TaskSpecError("context.runner", "expected auto, inprocess or spark")
    task_id = body.get("id") or new_task_id("compact", ds, now_ms)
    if not isinstance(task_id, str) or "/" in task_id:
        raise TaskSpecError("id", f"invalid task id {task_id!r}")
    payload = {**body, "type": "compact", "id": task_id, "dataSource": ds,
               "ioConfig": {"type": "compact", "inputSpec": {"type": "interval", "interval": interval.iso()}},
               "groupId": body.get("groupId") or task_id}
    return CompactTaskSpec(task_id, ds, interval, payload, config_raw, runner_name)
