"""Druid's native query HTTP API.

``POST /druid/v2`` (``?pretty``), ``DELETE /druid/v2/{queryId}``, ``GET /druid/v2/datasources`` and
``GET /druid/v2/datasources/{ds}`` (``?interval=`` with ``_`` for ``/``), plus ``/dimensions`` and
``/metrics`` under it. Routers reach the broker through ``request.app.state.ctx.broker``
(``GET /status`` and ``/status/health`` are the app's own).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
from fastapi import APIRouter, Request, Response

from radstack.time.intervals import Interval, Period, TimeParseError, datetime_to_ms, ms_to_datetime
from serving.auth import datasource_reader, query_canceller, request_user
from serving.broker.connection import WatchedStream, client_key, run_until_disconnect, write_deadline
from serving.broker.native import StreamedAnswer, query_id_of, run_native_query
from serving.broker.service import BrokerService
from serving.broker.store.projection_views import projection_header
from serving.errors import DruidError, invalid_input, query_error

router = APIRouter()


def broker_of(request: Request) -> BrokerService:
    return request.app.state.ctx.broker


def _encode(data: Any, pretty: bool = False) -> bytes:
    return orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY | (orjson.OPT_INDENT_2 if pretty else 0))


def json_response(data: Any, *, status: int = 200, pretty: bool = False,
                  headers: dict[str, str] | None = None) -> Response:
    return Response(_encode(data, pretty), status_code=status, media_type="application/json", headers=headers)


def _max_body(request: Request) -> int:
    settings = getattr(request.app.state.ctx, "settings", None)
    if settings is not None:
        return int(settings.server.max_body_bytes or 64 * 1024 * 1024)
    return 64 * 1024 * 1024


@router.post("/druid/v2")
@router.post("/druid/v2/")
async def post_native(request: Request) -> Response:
    pretty = "pretty" in request.query_params
    try:
        body = await request.body()
        if len(body) > _max_body(request):
            raise DruidError("Request body too large", category="INVALID_INPUT", status=413)
        try:
            query = orjson.loads(body)
        except orjson.JSONDecodeError as e:
            raise invalid_input(f"Malformed query JSON: {e}") from e
        if not isinstance(query, dict):
            raise invalid_input("A native query must be a JSON object")
        service = broker_of(request)
        qid = query_id_of(query) or service.queries.new_id()
        used: dict[str, str] = {}
        body = await run_until_disconnect(request, lambda: service.queries.abandon(qid), run_native_query, service,
                                          query, query_id=qid, user=request_user(request), used_projections=used,
                                          client=client_key(request), encode=lambda rows: _encode(rows, pretty),
                                          stream=not pretty)
    except DruidError as e:  # the app's handler renders it
        raise query_error(e) from None
    headers = {"X-Druid-Query-Id": qid, **projection_header(used)}
    if isinstance(body, StreamedAnswer):  # a scan: written batch by batch while it is read
        return WatchedStream(body.chunks(), write_timeout=write_deadline(service.settings.server.write_timeout_seconds, body.running),
                             media_type="application/json", headers=headers)
    return Response(body, media_type="application/json", headers=headers)


@router.delete("/druid/v2/{query_id}")
async def cancel_native(query_id: str, request: Request) -> Response:
    if broker_of(request).queries.cancel(query_id, query_canceller(request_user(request))):
        return Response(status_code=202)
    raise DruidError(f"Query [{query_id}] is not running", category="NOT_FOUND")


@router.get("/druid/v2/datasources")
async def list_datasources(request: Request) -> Response:
    may_read = datasource_reader(request)
    return json_response([ds for ds in broker_of(request).datasources() if may_read(ds)])


def _interval_param(raw: str | None) -> Interval:
    if raw:
        try:
            return Interval.parse(raw.replace("_", "/"))
        except (TimeParseError, ValueError) as e:
            raise invalid_input(f"Cannot parse interval [{raw}]: {e}") from e
    # Druid's default: the last week (druid.query.segmentMetadata.defaultHistory) up to now
    now = datetime_to_ms(datetime.now(UTC))
    return Interval(datetime_to_ms(Period.parse("P1W").add_to(ms_to_datetime(now), -1)), now)


def datasource_schema(service: BrokerService, ds: str, interval: Interval) -> dict[str, list[str]]:
    """Dimensions and metrics of the segments of ``ds`` served for ``interval`` (Druid's ClientInfo)."""
    dims: list[str] = []
    metrics: list[str] = []
    st = service.datasource(ds)
    if st is None:
        return {"dimensions": [], "metrics": []}
    for c in st.chunks:
        if not c.clip.overlaps(interval):
            continue
        seg = c.loaded.segment
        for d in seg.dimensions:
            if d not in dims:
                dims.append(d)
        for m in seg.metrics:
            if m not in metrics:
                metrics.append(m)
    return {"dimensions": sorted(dims), "metrics": sorted(metrics)}


@router.get("/druid/v2/datasources/{ds}")
async def get_datasource(ds: str, request: Request) -> Response:
    iv = _interval_param(request.query_params.get("interval"))
    return json_response(datasource_schema(broker_of(request), ds, iv))


@router.get("/druid/v2/datasources/{ds}/dimensions")
async def get_dimensions(ds: str, request: Request) -> Response:
    iv = _interval_param(request.query_params.get("interval"))
    return json_response(datasource_schema(broker_of(request), ds, iv)["dimensions"])


@router.get("/druid/v2/datasources/{ds}/metrics")
async def get_metrics(ds: str, request: Request) -> Response:
    iv = _interval_param(request.query_params.get("interval"))
    return json_response(datasource_schema(broker_of(request), ds, iv)["metrics"])
