"""Druid's Overlord task API (``/druid/indexer/v1``) over :class:`serving.overlord.tasks.TaskRunner`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse
from starlette.concurrency import run_in_threadpool

from radstack.config import Settings
from radstack.datasources import case_twin, case_twin_message
from radstack.storage.metadata import MetadataStore, TaskExistsError
from radstack.storage.raw_archive import input_topics
from radstack.storage.supervisors import datasource_catalog
from radstack.time.clock import now_millis
from radstack.time.intervals import format_instant
from serving.auth import User, datasource_reader, request_user
from serving.errors import DruidError, invalid_input, not_found
from serving.input_policy import InputForbidden
from serving.overlord.input_sources import check_input_source
from serving.overlord.task_spec import TaskSpecError
from serving.overlord.task_types import parse_any_task
from serving.server_context import ServerContext

router = APIRouter(prefix="/druid/indexer/v1")

TASK_STATES = ("running", "complete", "waiting", "pending")
MAX_LOG_BYTES = 8 * 1024 * 1024  # one answer's share of a task log; ask again with an offset for more


def _ctx(request: Request) -> Any:
    return request.app.state.ctx


async def read_json(request: Request) -> Any:
    body = await request.body()
    if not body.strip():
        raise invalid_input("the request body is empty; expected a JSON object")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise invalid_input(f"the request body is not valid JSON: {e}") from e


@router.post("/task")
async def submit_task(request: Request) -> dict[str, str]:
    body = await read_json(request)
    ctx = _ctx(request)
    try:
        spec = parse_any_task(body, now_millis())
    except TaskSpecError as e:
        raise DruidError(str(e), category="INVALID_INPUT", context={"field": e.path}) from e
    twin = case_twin(spec.data_source, await run_in_threadpool(ctx.metadata.data_sources, used_only=False))
    if twin is not None:
        raise invalid_input(case_twin_message(spec.data_source, twin))
    input_source = getattr(spec, "input_source", None)
    user = request_user(request)
    if user is not None:
        user.require("DATASOURCE", [spec.data_source], "WRITE")
        if input_source is not None:
            await run_in_threadpool(_authorize_input, user, input_source, spec.data_source, ctx.settings,
                                     ctx.metadata)
    if input_source is not None:
        try:
            await run_in_threadpool(check_input_source, input_source, ctx.settings)
        except InputForbidden as e:
            raise DruidError(str(e), category="FORBIDDEN", context={"field": "spec.ioConfig.inputSource"}) from e

    try:
        await run_in_threadpool(ctx.task_runner.submit, spec)
    except TaskExistsError as e:
        raise invalid_input(f"Task[{spec.id}] already exists") from e
    return {"task": spec.id}


def _authorize_input(user: User | None, source: dict[str, Any], data_source: str, settings: Settings,
                     metadata: MetadataStore) -> None:
    """What reading ``source`` needs, besides WRITE on the task's datasource. As Druid's input-source
    security: READ on ``EXTERNAL`` named like the type, except ``inline`` (nothing) and the two that read
    radstack's own data — ``druid`` (READ on the datasource it re-indexes) and ``archive`` (READ on each
    topic, and on every datasource whose spec reads it: the archive holds their raw events)."""
    typ = str(source.get("type"))
    if typ == "inline":
        return
    if typ == "druid":
        user.require("DATASOURCE", [str(source.get("dataSource"))], "READ")
        return
    if typ == "archive":
        topics = input_topics(source, data_source)
        user.require("TOPIC", topics, "READ")
        catalog = datasource_catalog(settings, metadata)
        readers = [name for name, ds in catalog.items() if set(ds.processing.topics) & set(topics)]
        user.require("DATASOURCE", readers, "READ")
        return
    user.require("EXTERNAL", [typ], "READ")


def _status_json(ctx: ServerContext, row: Any) -> dict[str, Any]:
    live = ctx.task_runner.get(row.id)
    if live is not None:
        runner_status = live.runner_status
        status, duration = "RUNNING", -1
    else:
        runner_status = "NONE"
        status = row.status
        duration = -1 if row.duration_ms is None else row.duration_ms
    waiting = live is not None and runner_status == "WAITING"
    created = format_instant(row.created_date)
    return {
        "id": row.id,
        "groupId": row.group_id or row.id,
        "type": row.type,
        "createdTime": created,
        "queueInsertionTime": created,
        "statusCode": status,
        "status": status,
        "runnerStatusCode": runner_status,
        "duration": duration,
        "location": {
            "host": None if waiting else ctx.settings.server.host,
            "port": -1 if waiting else int(ctx.settings.server.port or -1),
            "tlsPort": -1,
        },
        "dataSource": row.datasource,
        "errorMsg": row.error_msg,
    }


def _task_row(ctx: ServerContext, task_id: str, request: Request) -> Any:
    """The task's row; with auth, READ on its datasource is needed to see it (Druid's TaskResourceFilter)."""
    row = ctx.metadata.get_task(task_id)
    if row is None:
        raise not_found(f"Cannot find any task with id: [{task_id}]")
    user = request_user(request)
    if user is not None:
        user.require("DATASOURCE", [row.datasource], "READ")
    return row


@router.get("/task/{task_id}")
def get_task(task_id: str, request: Request) -> dict[str, Any]:
    row = _task_row(_ctx(request), task_id, request)
    return {"task": row.id, "payload": row.payload}


@router.get("/task/{task_id}/status")
def get_task_status(task_id: str, request: Request) -> dict[str, Any]:
    ctx = _ctx(request)
    row = _task_row(ctx, task_id, request)
    return {"task": row.id, "status": _status_json(ctx, row)}


@router.get("/task/{task_id}/reports")
def get_task_reports(task_id: str, request: Request) -> dict[str, Any]:
    ctx = _ctx(request)
    row = _task_row(ctx, task_id, request)
    live = ctx.task_runner.get(task_id)
    if live is not None:
        return live.live_report()
    if not row.report:
        raise not_found(f"No task reports were found for this task: [{task_id}]")
    return row.report


@router.get("/task/{task_id}/log")
def get_task_log(task_id: str, request: Request, offset: int = 0) -> PlainTextResponse:
    """Druid's task log: the text of the task's own log (a rebuild's ``{home}/logs/tasks/<id>.log``);
    ``offset`` as Druid reads it: bytes from the start, or from the end when negative. Only a file under
    the server's logs directory is ever read."""
    ctx = _ctx(request)
    row = _task_row(ctx, task_id, request)
    where = (row.report or {}).get("log") if isinstance(row.report, dict) else None
    if not where:
        raise not_found(f"No log was found for this task: [{task_id}]")
    logs = ctx.settings.logs_dir.resolve()
    path = Path(str(where)).resolve()
    if not path.is_relative_to(logs) or not path.is_file():
        raise not_found(f"No log was found for this task: [{task_id}]")
    size = path.stat().st_size
    start = max(0, size + offset) if offset < 0 else min(offset, size)
    with path.open("rb") as f:
        f.seek(start)
        data = f.read(MAX_LOG_BYTES)
    return PlainTextResponse(data.decode("utf-8", "replace"))


@router.post("/task/{task_id}/shutdown")
def shutdown_task(task_id: str, request: Request) -> dict[str, str]:
    ctx = _ctx(request)
    if not ctx.task_runner.shutdown(task_id):
        _task_row(ctx, task_id, request)  # 404 for unknown ids
        raise not_found(f"Task [{task_id}] is not running")
    return {"task": task_id}


@router.post("/datasources/{data_source}/shutdownAllTasks")
def shutdown_all_tasks(data_source: str, request: Request) -> dict[str, str]:
    ctx = _ctx(request)
    n = 0
    for task_id in ctx.task_runner.active_ids():
        st = ctx.task_runner.get(task_id)
        if st is not None and st.spec.data_source == data_source and ctx.task_runner.shutdown(task_id):
            n += 1
    if n == 0:
        raise not_found(f"No running tasks for datasource [{data_source}]")
    return {"dataSource": data_source}


def _list(request: Request, state: str | None, datasource: str | None, max_: int | None, type_: str | None,
          ) -> list[dict[str, Any]]:
    """Druid's task lists, with only the tasks of datasources the user may READ."""
    ctx, may_read = _ctx(request), datasource_reader(request)
    if state is not None and state.lower() not in TASK_STATES:
        raise invalid_input(f"Invalid task state [{state}]; valid states are {', '.join(TASK_STATES)}",
                            state=state)
    s = state.lower() if state else None
    rows = ctx.metadata.list_tasks(datasource=datasource, state="complete" if s == "complete" else
                                   ("running" if s else None))
    rows = [r for r in rows if may_read(r.datasource) and (not type_ or r.type == type_)]
    out = [_status_json(ctx, r) for r in rows]
    if s in ("waiting", "pending"):
        out = [o for o in out if o["runnerStatusCode"] == "WAITING"]
    elif s == "running":
        out = [o for o in out if o["runnerStatusCode"] != "WAITING"]
    if max_ is not None and s in (None, "complete"):
        complete = [o for o in out if o["status"] != "RUNNING"][:max_]
        keep = {id(o) for o in complete}
        out = [o for o in out if o["status"] == "RUNNING" or id(o) in keep]
    return out


@router.get("/tasks")
def list_tasks(request: Request, state: str | None = None, datasource: str | None = None,
               max: int | None = None, type: str | None = None) -> list[dict[str, Any]]:  # noqa: A002
    return _list(request, state, datasource, max, type)


@router.get("/runningTasks")
def running_tasks(request: Request, datasource: str | None = None) -> list[dict[str, Any]]:
    return _list(request, "running", datasource, None, None)


@router.get("/waitingTasks")
def waiting_tasks(request: Request, datasource: str | None = None) -> list[dict[str, Any]]:
    return _list(request, "waiting", datasource, None, None)


@router.get("/pendingTasks")
def pending_tasks(request: Request, datasource: str | None = None) -> list[dict[str, Any]]:
    return _list(request, "pending", datasource, None, None)


@router.get("/completeTasks")
def complete_tasks(request: Request, datasource: str | None = None, max: int | None = None,  # noqa: A002
                   ) -> list[dict[str, Any]]:
    return _list(request, "complete", datasource, max, None)
