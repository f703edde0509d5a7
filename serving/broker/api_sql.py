"""``POST /druid/v2/sql`` (and ``/druid/v2/sql/``) and ``DELETE /druid/v2/sql/{sqlQueryId}``.

Bodies: ``application/json`` (``query``, ``resultFormat``, ``header``, ``typesHeader``,
``sqlTypesHeader``, ``context``, ``parameters``), or ``text/plain`` / form-encoded raw SQL (object
format, no header); anything else is 415. Errors are answered before the first byte of the body;
results are streamed batch by batch while the query holds its slot in the query manager.
"""

from __future__ import annotations

import contextlib
from typing import Any

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response

from radstack.config import ServerSettings
from serving.auth import query_canceller, request_user
from serving.broker.connection import WatchedStream, client_key, run_until_disconnect, write_deadline
from serving.broker.queries.query_manager import RunningQuery
from serving.broker.sql.engine import ServerInfo, execute
from serving.broker.sql.request import authorizer, context_and_parameters, reader, stringify_arrays
from serving.broker.sql.result_formats import ResultWriter, check_format
from serving.broker.store.projection_views import projection_header
from serving.broker.store.state import QueryableBroker
from serving.errors import DruidError, not_found, query_error
from serving.server_context import ServerContext

router = APIRouter()


def _bool(body: dict[str, Any], key: str) -> bool:
    v = body.get(key, False)
    if v is None:
        return False
    if not isinstance(v, bool):
        raise DruidError(f"'{key}' must be a boolean")
    return v


async def parse_request(request: Request) -> dict[str, Any]:
    """The SQL request as Druid's SqlQuery fields, from whichever body type was sent."""
    ctype = (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
    raw = await request.body()
    if ctype in ("application/json", ""):
        if ctype == "" and not raw:
            raise DruidError("Unsupported Content-Type: none", status=415)
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            raise DruidError(f"Malformed SQL query wrapped in JSON: {e}") from e
        if not isinstance(body, dict):
            raise DruidError("Malformed SQL query: expected a JSON object")
        return body
    if ctype in ("text/plain", "application/x-www-form-urlencoded"):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DruidError("The SQL query is not valid UTF-8") from e
        return {"query": text}
    raise DruidError(f"Unsupported Content-Type: {ctype}", status=415)


def _broker(request: Request) -> Any:
    ctx = getattr(request.app.state, "ctx", None)
    broker = getattr(ctx, "broker", None)
    if broker is None:
        raise DruidError("The broker is not running", category="SERVICE_UNAVAILABLE")
    return broker


@router.post("/druid/v2/sql")
@router.post("/druid/v2/sql/")
async def post_sql(request: Request) -> Response:
    body = await parse_request(request)
    query = body.get("query")
    if not isinstance(query, str) or not query.strip():
        raise DruidError("Field 'query' is required and must be a non-empty string")
    fmt = check_format(body.get("resultFormat"))
    header = _bool(body, "header")
    types_header, sql_types_header = _bool(body, "typesHeader"), _bool(body, "sqlTypesHeader")
    if (types_header or sql_types_header) and not header:
        raise DruidError("Cannot include type headers without also setting [header]")
    context, parameters = context_and_parameters(body)
    broker = _broker(request)
    manager = broker.queries
    qid = manager.checked_id(context.get("sqlQueryId"), "sqlQueryId") or manager.new_id()
    context = {**context, "sqlQueryId": qid}
    return await run_until_disconnect(request, lambda: manager.abandon(qid), _run, request, broker, query, fmt,
                                      header, types_header, sql_types_header, context, parameters)


def _run(request: Request, broker: QueryableBroker, query: str, fmt: str, header: bool, types_header: bool,
         sql_types_header: bool, context: dict[str, Any], parameters: list[Any]) -> Response:
    ctx = request.app.state.ctx
    manager = broker.queries
    qid = context["sqlQueryId"]
    stack = contextlib.ExitStack()
    user = request_user(request)
    try:
        running = stack.enter_context(manager.run(qid, manager.timeout_of(context), manager.priority_of(context),
                                                  owner=user.name if user is not None else None,
                                                  client=client_key(request)))
        server = server_info(ctx, broker)
        result = execute(broker, query, context=context, parameters=parameters,
                         metadata=getattr(ctx, "metadata", None), running=running, server=server,
                         authorize=authorizer(user), can_read=reader(user))
        stack.callback(result.close)
    except DruidError as e:
        stack.close()
        raise query_error(e) from None
    except BaseException:
        stack.close()
        raise
    stringify = stringify_arrays(context)
    try:
        writer = ResultWriter(fmt, result.columns, header=header, types_header=types_header,
                              sql_types_header=sql_types_header, stringify_arrays=stringify,
                              time_zone=context.get("sqlTimeZone"))
    except DruidError as e:  # an invalid sqlTimeZone the query itself never read
        stack.close()
        raise query_error(e) from None
    headers = {"X-Druid-SQL-Query-Id": qid, **projection_header(result.translation.projections)}
    if header:
        headers["X-Druid-SQL-Header-Included"] = "yes"
    if result.whole():  # a dashboard's answer: written here, not streamed batch by batch through the pool
        try:
            content = writer.write_all(result.batches())
        finally:
            stack.close()
        return Response(content, media_type=writer.content_type, headers=headers)

    def body() -> Any:
        try:
            yield from writer.stream(_checked(result.batches(), running))
        finally:
            with contextlib.suppress(Exception):
                stack.close()

    return WatchedStream(body(), write_timeout=write_deadline(_server_settings(ctx, broker).write_timeout_seconds, running),
                         media_type=writer.content_type, headers=headers)


def _server_settings(ctx: ServerContext, broker: QueryableBroker) -> ServerSettings:
    settings = getattr(ctx, "settings", None) or getattr(broker, "settings", None)
    return settings.server if settings is not None else ServerSettings()


def server_info(ctx: ServerContext, broker: QueryableBroker) -> ServerInfo:
    """What ``sys.servers`` reports: the configured bind address and port (never the request's Host
    header, which the client chooses)."""
    server = _server_settings(ctx, broker)
    return ServerInfo(server.host, server.port, getattr(ctx, "started_ms", None))


def _checked(batches: Any, running: RunningQuery) -> Any:
    """Stop between batches once cancelled or timed out (the first batch was checked before the
    response started; a stop after that truncates the body, as Druid's does)."""
    for i, b in enumerate(batches):
        if i:
            running.check()
        yield b


@router.delete("/druid/v2/sql/{sql_query_id}")
def cancel_sql(sql_query_id: str, request: Request) -> Response:
    broker = _broker(request)
    if broker.queries.cancel(sql_query_id, query_canceller(request_user(request))):
        return Response(status_code=202)
    raise not_found(f"Query [{sql_query_id}] not found (it may have finished already)")
