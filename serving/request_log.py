"""The request log (Druid's ``druid.request.logging``): one line per query answered, in ``serve.log``.

    POST /druid/v2/sql 200 12.4 ms 1,234 B id=9f1c… user=alice client=127.0.0.1

Queries (``/druid/v2`` and below) are logged at INFO by the ``radstack.requests`` logger; other requests
at DEBUG, and any answer of 500 or more at WARNING. The query id is the one the answer carries
(``X-Druid-SQL-Query-Id`` / ``X-Druid-Query-Id``), so a line is found from a client's error report.
The statement itself is not logged: it may hold what its user would not want in a shared log.
"""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from serving.auth import request_user

log = logging.getLogger("radstack.requests")

_ID_HEADERS = (b"x-druid-sql-query-id", b"x-druid-query-id")


class RequestLogMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status, size, query_id = 0, 0, ""

        async def watching_send(msg: Message) -> None:
            nonlocal status, size, query_id
            if msg["type"] == "http.response.start":
                status = int(msg["status"])
                for k, v in msg.get("headers", ()):
                    if k.lower() in _ID_HEADERS:
                        query_id = v.decode("latin-1")
            elif msg["type"] == "http.response.body":
                size += len(msg.get("body", b""))
            await send(msg)

        try:
            await self.app(scope, receive, watching_send)
        finally:
            _write(scope, status, size, query_id, (time.perf_counter() - started) * 1000)


def _write(scope: Scope, status: int, size: int, query_id: str, ms: float) -> None:
    path = str(scope.get("path", ""))
    level = logging.WARNING if status >= 500 or status == 0 else (
        logging.INFO if path.startswith("/druid/v2") else logging.DEBUG)
    if not log.isEnabledFor(level):
        return
    user = request_user(scope)
    client = (scope.get("client") or ("-",))[0]
    log.log(level, "%s %s %s %.1f ms %s B id=%s user=%s client=%s", scope.get("method", "-"), path,
            status or "aborted", ms, f"{size:,}", query_id or "-", user.name if user is not None else "-", client)
