"""The ``kill_task_logs`` duty (Druid's task log cleaner, ``druid.indexer.logs.kill.*``): once per
``coordinator.kill_task_logs.period_seconds``, the log files of tasks that finished more than
``duration_to_retain`` ago are deleted — never the log of a task still running, and never a task's row
(its status and report stay listed; ``GET …/task/{id}/log`` then answers 404)."""

from __future__ import annotations

import logging
from pathlib import Path

from radstack.storage.task_records import spark_task_log_path, task_log_path
from radstack.time.intervals import Period, TimeParseError, datetime_to_ms, ms_to_datetime
from serving.coordinator.duties.base import Duty, DutyContext

log = logging.getLogger(__name__)

STATE_KEY = "coordinator.kill_task_logs.last_run"


def _logs_of(ctx: DutyContext, task_id: str) -> list[Path]:
    """Where a task's log may be: a recorded task's (radstack/storage/task_records.py) or an Overlord
    Spark task's output (serving/overlord/spark_tasks.py)."""
    return [task_log_path(ctx.settings, task_id), spark_task_log_path(ctx.settings, task_id)]


def _run(ctx: DutyContext) -> dict[str, int]:
    conf = ctx.settings.coordinator.kill_task_logs
    if not conf.on:
        return {"deleted": 0}
    last = ctx.metadata.get_state(STATE_KEY)
    if last is not None and ctx.now_ms - int(last) < int(float(conf.period_seconds) * 1000):
        return {"deleted": 0}
    ctx.metadata.put_state(STATE_KEY, ctx.now_ms)
    try:
        cutoff = datetime_to_ms(Period.parse(conf.duration_to_retain).add_to(ms_to_datetime(ctx.now_ms), -1))
    except (TimeParseError, ValueError) as e:
        log.error("coordinator.kill_task_logs.duration_to_retain: %s", e)
        return {"deleted": 0}
    deleted = 0
    for task in ctx.metadata.list_tasks(state="complete"):
        if task.created_date + (task.duration_ms or 0) >= cutoff:
            continue
        for path in _logs_of(ctx, task.id):
            if path.is_file():
                path.unlink()
                deleted += 1
    if deleted:
        log.info("deleted the logs of %d finished task(s) older than %s", deleted, conf.duration_to_retain)
    return {"deleted": deleted}


DUTY = Duty("kill_task_logs", _run)
