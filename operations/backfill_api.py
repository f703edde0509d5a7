"""``POST /radstack/v1/backfill``: start a batch rebuild from the serving process (the console's
backfill button), as a task.

The request is checked here — the interval parses, the datasource exists, the interval is closed
(window period + the archiver's watermark) unless ``force`` — and answered with Druid's error JSON when
it is not. At most ``server.backfill_slots`` rebuilds run at once; more wait (up to
``server.max_queued_backfills``, then 429), as Druid's tasks wait for a task slot. The rebuild itself runs as ``radctl backfill --via local --json`` in a child process, so
Spark never shares the server's process; it is recorded in the task table (type
``radstack_backfill``: visible in ``GET /druid/indexer/v1/tasks``, ``sys.tasks`` and the console), and its
per-chunk summary becomes the task report. Writes need ``admin`` when authentication is on.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from batch.backfill import BackfillError, check_plan_closed, plan_backfill
from batch.planning import BackfillPlanError, NotClosedError
from batch.rebuild_tasks import TASK_TYPE, new_rebuild_task_id, task_log_path
from operations.processes import radctl_argv
from serving.auth import request_user
from serving.errors import DruidError, invalid_input

router = APIRouter()



class BackfillSlots:
    """Like Druid's task slots: ``server.backfill_slots`` backfills run at once, up to
    ``server.max_queued_backfills`` more wait for a slot (in arrival order), beyond that 429."""

    def __init__(self, slots: int, max_queued: int) -> None:
        self._slots = threading.Semaphore(max(1, slots))
        self.max_queued = max_queued
        self._waiting = 0
        self._lock = threading.Lock()

    def enter_queue(self) -> int:
        """Take a place in the queue (its position, 0 = none ahead); 429 when it is full."""
        with self._lock:
            if self._waiting >= self.max_queued:
                raise DruidError(f"{self._waiting} backfills are waiting for a slot already "
                                 "(server.max_queued_backfills): try again later", category="CAPACITY_EXCEEDED")
            self._waiting += 1
            return self._waiting - 1

    def run(self, work: Any) -> None:
        """Wait for a slot (leaving the queue), run ``work()``, free the slot."""
        self._slots.acquire()
        with self._lock:
            self._waiting -= 1
        try:
            work()
        finally:
            self._slots.release()


def _slots(ctx: Any) -> BackfillSlots:
    slots = getattr(ctx, "backfill_slots", None)
    if slots is None:
        server = ctx.settings.server
        slots = ctx.backfill_slots = BackfillSlots(server.backfill_slots, server.max_queued_backfills)
    return slots


@router.post("/radstack/v1/backfill")
async def start_backfill(request: Request) -> JSONResponse:
    try:
        body = await request.json()
    except ValueError as e:
        raise invalid_input(f"the body must be JSON: {e}") from e
    if not isinstance(body, dict):
        raise invalid_input("the body must be a JSON object with dataSource and interval")
    ds, interval, force = body.get("dataSource"), body.get("interval"), bool(body.get("force", False))
    if not isinstance(ds, str) or not ds:
        raise invalid_input("dataSource is required")
    if not isinstance(interval, str) or not interval:
        raise invalid_input("interval is required (ISO-8601, e.g. 2026-11-20/P1D)")
    ctx = request.app.state.ctx
    settings = ctx.settings
    try:
        plan = plan_backfill(settings, interval, ds)
        if not force:
            check_plan_closed(settings, plan)
    except NotClosedError as e:
        raise invalid_input(f"{e} (send \"force\": true to rebuild anyway)") from e
    except (BackfillPlanError, BackfillError, KeyError, ValueError) as e:
        raise invalid_input(str(e).strip("'\"")) from e
    slots = _slots(ctx)
    ahead = slots.enter_queue()
    task_id = new_rebuild_task_id(ds)
    user = request_user(request)
    started_by = "console" + (f" ({user.name})" if user is not None else "")
    payload = {"type": TASK_TYPE, "id": task_id, "dataSource": ds, "interval": interval, "force": force,
               "chunks": plan.total, "startedBy": started_by}  # fmt: skip
    ctx.metadata.insert_task(task_id, type=TASK_TYPE, datasource=ds, payload=payload)  # visible while it waits
    argv = radctl_argv("backfill", "--via", "local", "--json", "--no-wait", "--interval", interval,
                       "--datasource", ds, "--task-id", task_id, "--started-by", started_by)
    if force:
        argv.append("--force")
    threading.Thread(target=slots.run, args=(lambda: _run(ctx, task_id, argv),), daemon=True, name=task_id).start()
    return JSONResponse({"task": task_id, "chunks": plan.total, "waitingAhead": ahead})


def _run(ctx: Any, task_id: str, argv: list[str]) -> None:
    """Run the child; it records the task's outcome itself (batch/rebuild_tasks.py). Here only what the
    child could not record: it did not start, or died before it finished the task."""
    settings = ctx.settings
    log = task_log_path(settings, task_id)
    log.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if settings.source is not None:
        env["RADSTACK_CONFIG"] = str(settings.source)
    env["RADSTACK_HOME"] = str(settings.home)
    t0 = time.monotonic()
    try:
        with log.open("ab") as err:  # the child's stderr (progress, a crash) joins the task's own log
            proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=err, timeout=24 * 3600)
        row = ctx.metadata.get_task(task_id)
        if row is not None and row.active:
            ctx.metadata.update_task(task_id, status="FAILED", duration_ms=int((time.monotonic() - t0) * 1000),
                                     error_msg=f"radctl backfill exited {proc.returncode} before it finished the "
                                               "task; see its log", report={"chunks": [], "log": str(log)})
    except (OSError, subprocess.SubprocessError, DruidError) as e:
        ctx.metadata.update_task(task_id, status="FAILED", duration_ms=int((time.monotonic() - t0) * 1000),
                                 error_msg=f"{type(e).__name__}: {e}", report={"chunks": [], "log": str(log)})
