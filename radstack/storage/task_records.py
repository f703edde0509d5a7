"""Work recorded as a task: a row in the task table (so it shows in ``GET /druid/indexer/v1/tasks``,
``sys.tasks`` and the console's Tasks view) and a log of its own (``{home}/logs/tasks/<task id>.log``,
served by ``GET /druid/indexer/v1/task/{id}/log``) — for the work that runs outside the Overlord's task
runner: every rebuild (batch/rebuild_tasks.py) and the coordinator's compaction and kill passes."""

from __future__ import annotations

import secrets
import time
import traceback
from pathlib import Path
from typing import Any

from radstack.config import Settings
from radstack.storage.metadata import MetadataStore
from radstack.time.clock import now_millis
from radstack.time.intervals import format_instant


def new_task_id(task_type: str, datasource: str) -> str:
    return f"{task_type}_{datasource}_{secrets.token_hex(4)}_{format_instant(now_millis())}"


def task_log_path(settings: Settings, task_id: str) -> Path:
    return settings.logs_dir / "tasks" / f"{task_id.replace(':', '_').replace('/', '_')}.log"


def spark_task_log_path(settings: Settings, task_id: str) -> Path:
    """Where an Overlord task run as a Spark job writes its output (serving/overlord/spark_tasks.py)."""
    return settings.logs_dir / f"task-{task_id}.log"


class TaskRecord:
    """One task's row and log; :meth:`finish` records the outcome (the row stays RUNNING until then)."""

    def __init__(self, settings: Settings, metadata: MetadataStore, *, task_type: str, datasource: str,
                 payload: dict[str, Any], started_by: str, task_id: str | None = None) -> None:
        self.metadata = metadata
        self.id = task_id or new_task_id(task_type, datasource)
        self.log = task_log_path(settings, self.id)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.started_by = started_by
        self._t0 = time.monotonic()
        if task_id is None or metadata.get_task(task_id) is None:  # the console's button made it already
            metadata.insert_task(self.id, type=task_type, datasource=datasource, payload={
                "type": task_type, "id": self.id, "dataSource": datasource, **payload, "startedBy": started_by})

    def line(self, text: str) -> None:
        with self.log.open("a", encoding="utf-8") as f:
            f.write(f"{format_instant(now_millis())} {text}\n")

    def failure(self, error: BaseException) -> None:
        self.line("".join(traceback.format_exception(error)).rstrip())

    def finish(self, ok: bool, error: str | None, report: dict[str, Any]) -> None:
        self.metadata.update_task(self.id, status="SUCCESS" if ok else "FAILED",
                                  duration_ms=int((time.monotonic() - self._t0) * 1000), error_msg=error,
                                  report={**report, "log": str(self.log), "startedBy": self.started_by})
