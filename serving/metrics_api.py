"""``GET /metrics`` for the serving process, and the broker's query metrics.

:func:`install` adds both to the app: the route, and :class:`QueryMetricsMiddleware`, which times every
query request (``POST /druid/v2`` and ``/druid/v2/sql``), labels it with its type (``sql``, or the
native ``queryType`` read from the body as the app consumes it) and, for failures, counts the Druid
error code from the error JSON (``errorCode``, else the legacy ``error``, else the HTTP status).

Gauges that describe state (segments used / unused / overshadowed per datasource, segments the broker
serves) are computed from the metadata store and the broker at scrape time.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter, defaultdict
from typing import Any

import orjson
from fastapi import APIRouter, FastAPI, Request, Response
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from radstack import metrics
from radstack.storage.metadata import MetadataStore
from radstack.storage.timeline import TimelineConflictError, timelines_by_data_source
from serving.server_context import ServerContext

log = logging.getLogger(__name__)

__all__ = ["router", "install", "QueryMetricsMiddleware", "segment_state_counts", "refresh_state_gauges"]

router = APIRouter()

_NATIVE_PATHS = ("/druid/v2", "/druid/v2/")
_SQL_PATHS = ("/druid/v2/sql", "/druid/v2/sql/")
_QUERY_TYPE = re.compile(rb'"queryType"\s*:\s*"([A-Za-z_]+)"')
_MAX_CAPTURE = 256 * 1024


def segment_state_counts(metadata: MetadataStore) -> dict[str, dict[str, int]]:
    """``{datasource: {"used", "unused", "overshadowed"}}`` from the metadata store."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: {"used": 0, "unused": 0, "overshadowed": 0})
    used = []
    for row in metadata.segment_rows(None, used=None):
        ds = row.segment.data_source
        if row.used:
            counts[ds]["used"] += 1
            used.append(row.segment)
        else:
            counts[ds]["unused"] += 1
    for ds, tl in timelines_by_data_source(used).items():
        try:
            counts[ds]["overshadowed"] = len(tl.overshadowed())
        except TimelineConflictError:
            continue
    return dict(counts)


def refresh_state_gauges(ctx: ServerContext) -> None:
    """Set the state gauges from the metadata store and the broker (best effort)."""
    try:
        metrics.set_segment_counts(segment_state_counts(ctx.metadata))
    except Exception:  # noqa: BLE001 - a scrape must not fail because the metadata store hiccups
        log.exception("could not read segment counts for /metrics")
    broker = getattr(ctx, "broker", None)
    if broker is not None and hasattr(broker, "segment_states"):
        try:
            served = Counter(s["datasource"] for s in broker.segment_states() if not s.get("is_overshadowed"))
            for ds in {*served, *_known_served_datasources()}:
                metrics.BROKER_SEGMENTS_SERVED.labels(ds).set(served.get(ds, 0))
        except Exception:  # noqa: BLE001
            log.exception("could not read the broker's segments for /metrics")


def _known_served_datasources() -> set[str]:
    out: set[str] = set()
    for m in metrics.BROKER_SEGMENTS_SERVED.collect():
        out.update(s.labels.get("datasource", "") for s in m.samples)
    return out


@router.get("/metrics", include_in_schema=False)
async def metrics_endpoint(request: Request) -> Response:
    ctx = getattr(request.app.state, "ctx", None)
    if ctx is not None:
        await run_in_threadpool(refresh_state_gauges, ctx)
    body = metrics.render()
    # the signed-in user (serving/auth.py puts it in the scope; this layer cannot import that one)
    user = (request.scope.get("state") or {}).get("user")
    if user is not None:
        body = readable_series(body, lambda ds: user.can("DATASOURCE", ds, "READ"))
    return Response(body, media_type=metrics.CONTENT_TYPE_LATEST)


_DATASOURCE_LABEL = re.compile(rb'[{,]datasource="((?:[^"\\]|\\.)*)"')


def readable_series(text: bytes, can_read: Any) -> bytes:
    """The exposition without the series about a datasource ``can_read`` refuses (its name is not told)."""
    out = []
    for line in text.splitlines(keepends=True):
        m = _DATASOURCE_LABEL.search(line) if not line.startswith(b"#") else None
        if m is not None:
            name = m.group(1).decode("utf-8", "replace").replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
            if not can_read(name):
                continue
        out.append(line)
    return b"".join(out)


def _error_code(status: int, body: bytes) -> str:
    try:
        err = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        err = None
    if isinstance(err, dict):
        code = err.get("errorCode") if err.get("error") == "druidException" else None
        code = code or err.get("errorCode") or err.get("error")
        if isinstance(code, str) and code:
            return code
    return str(status)


class QueryMetricsMiddleware:
    """Counts and times query requests; see the module docstring."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if scope["type"] != "http" or scope.get("method") != "POST" or path not in _NATIVE_PATHS + _SQL_PATHS:
            await self.app(scope, receive, send)
            return
        is_sql = path in _SQL_PATHS
        started = time.perf_counter()
        req_body = bytearray()
        resp_body = bytearray()
        status = 500
        recorded = False

        async def capture_receive() -> Message:
            msg = await receive()
            if not is_sql and msg["type"] == "http.request" and len(req_body) < _MAX_CAPTURE:
                req_body.extend(msg.get("body", b"")[: _MAX_CAPTURE - len(req_body)])
            return msg

        def record() -> None:
            nonlocal recorded
            if recorded:
                return
            recorded = True
            qtype = "sql"
            if not is_sql:
                m = _QUERY_TYPE.search(bytes(req_body))
                qtype = m.group(1).decode() if m else "unknown"
            code = _error_code(status, bytes(resp_body)) if status >= 400 else None
            metrics.observe_query(qtype, time.perf_counter() - started, code)

        async def capture_send(msg: Message) -> None:
            nonlocal status
            if msg["type"] == "http.response.start":
                status = int(msg["status"])
            elif msg["type"] == "http.response.body":
                if status >= 400 and len(resp_body) < _MAX_CAPTURE:
                    resp_body.extend(msg.get("body", b"")[: _MAX_CAPTURE - len(resp_body)])
                if not msg.get("more_body", False):
                    await send(msg)
                    record()
                    return
            await send(msg)

        try:
            await self.app(scope, capture_receive, capture_send)
        finally:
            record()


def install(app: FastAPI) -> None:
    """Mount ``GET /metrics`` and the query metrics middleware on ``app``."""
    app.include_router(router)
    app.add_middleware(QueryMetricsMiddleware)
