"""Task types, chosen by the task's ``type`` (Druid's ``Task`` subtypes): one parser per type, each
returning a spec that :class:`serving.overlord.tasks.TaskRunner` runs. A new task type is a parser
module in this folder plus its line here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from serving.overlord.compact_task import parse_compact_task
from serving.overlord.kill_task import parse_kill_task
from serving.overlord.task_spec import TASK_TYPES, TaskSpecError, parse_task

TaskParser = Callable[[Any, int], Any]

TASK_PARSERS: dict[str, TaskParser] = {
    **dict.fromkeys(TASK_TYPES, parse_task),  # index_parallel, index: native batch ingestion
    "compact": parse_compact_task,
    "kill": parse_kill_task,
}


def parse_any_task(body: Any, now_ms: int) -> Any:
    """The spec of a submitted task of any type (:class:`TaskSpecError` naming the bad field)."""
    if not isinstance(body, dict):
        raise TaskSpecError("", "the task must be a JSON object")
    parser = TASK_PARSERS.get(body.get("type"))  # type: ignore[arg-type]
    if parser is None:
        raise TaskSpecError("type", f"unsupported task type {body.get('type')!r}; supported: {', '.join(TASK_PARSERS)}")
    return parser(body, now_ms)
