"""Druid's ``kill`` task: parse it, and run it through :func:`serving.coordinator.duties.kill.kill_unused_segments`
(the same deletion the coordinator's kill duty does)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from radstack.storage.kill import KillError, kill_unused_segments
from radstack.time.intervals import Interval, TimeParseError, parse_instant
from serving.overlord.task_spec import TaskSpecError, new_task_id
from serving.overlord.task_state import TaskHost, TaskState
from serving.overlord.tasks import TaskCancelled

log = logging.getLogger(__name__)


def parse_kill_interval(text: Any) -> Interval:
    if not isinstance(text, str) or not text.strip():
        raise KillError("interval: required (an ISO interval START/END)")
    try:
        return Interval.parse(text)
    except (TimeParseError, ValueError) as e:
        raise KillError(f"interval: {e}") from e


def parse_versions(value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise KillError("versions: expected an array of version strings")
    return list(value)


def parse_instant_field(value: Any, name: str) -> int | None:
    if value is None:
        return None
    try:
        return parse_instant(str(value))
    except (TimeParseError, ValueError) as e:
        raise KillError(f"{name}: {e}") from e


@dataclass(frozen=True)
class KillTaskSpec:
    """Druid's ``kill`` task, run by :class:`serving.overlord.tasks.TaskRunner` through :meth:`run`."""

    id: str
    data_source: str
    interval: Interval
    payload: dict[str, Any]
    versions: tuple[str, ...] | None = None
    limit: int | None = None
    max_used_status_last_updated_ms: int | None = None
    dry_run: bool = False
    type: str = "kill"
    max_parse_exceptions: int = 0
    max_saved_parse_exceptions: int = 0

    def run(self, runner: TaskHost, state: TaskState) -> int:
        if state.cancel.is_set():

            raise TaskCancelled()
        report = kill_unused_segments(
            runner.metadata, runner.deep_storage, self.data_source, self.interval, dry_run=self.dry_run,
            versions=self.versions, max_used_status_last_updated_ms=self.max_used_status_last_updated_ms,
            limit=self.limit,
        )
        log.info("kill task %s: %s", self.id, report.to_json())
        if report.errors:
            raise KillError("; ".join(report.errors))
        return len(report.segments)


def parse_kill_task(body: Any, now_ms: int) -> KillTaskSpec:
    """``{"type": "kill", "id"?, "dataSource", "interval", "versions"?, "limit"?,
    "maxUsedStatusLastUpdatedTime"?, "dryRun"?}``. ``markAsUnused: true`` (removed from Druid) is refused:
    a kill never changes what is used."""

    if not isinstance(body, dict):
        raise TaskSpecError("", "the task must be a JSON object")
    ds = body.get("dataSource")
    if not isinstance(ds, str) or not ds.strip():
        raise TaskSpecError("dataSource", "required")
    try:
        interval = parse_kill_interval(body.get("interval"))
        versions = parse_versions(body.get("versions"))
        max_updated = parse_instant_field(body.get("maxUsedStatusLastUpdatedTime"), "maxUsedStatusLastUpdatedTime")
    except KillError as e:
        path, _, msg = str(e).partition(": ")
        raise TaskSpecError(path, msg) from e
    if body.get("markAsUnused"):
        raise TaskSpecError("markAsUnused", "not supported: mark the segments unused first, then kill them")
    limit = body.get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise TaskSpecError("limit", f"expected a positive integer, got {limit!r}")
    dry_run = body.get("dryRun", False)
    if not isinstance(dry_run, bool):
        raise TaskSpecError("dryRun", "expected true or false")
    task_id = body.get("id") or new_task_id("kill", ds, now_ms)
    if not isinstance(task_id, str) or "/" in task_id:
        raise TaskSpecError("id", f"invalid task id {task_id!r}")
    payload = {**body, "type": "kill", "id": task_id, "dataSource": ds, "interval": interval.iso(),
               "groupId": body.get("groupId") or task_id}
    return KillTaskSpec(task_id, ds, interval, payload, tuple(versions) if versions else None, limit,
                        max_updated, dry_run)
