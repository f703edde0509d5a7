"""A query's slot follows its client: a client that goes away gets its query cancelled, and one that
stops reading an answer loses the connection after ``server.write_timeout_seconds`` (or when the query's
own timeout passes first) — either way the slot is free within a second, not when the client decides.

:func:`run_until_disconnect` runs the query's work in the thread pool while it watches the connection
(after the body was read, the next ASGI message is the disconnect); :class:`WatchedStream` writes a
streamed answer chunk by chunk with a deadline on each write, and closes the chunk iterator (which frees
the slot) however the stream ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import anyio
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from serving.broker.queries.query_manager import RunningQuery

log = logging.getLogger(__name__)

T = TypeVar("T")
_END = object()


def client_key(request: Request) -> str | None:
    """The client address a query's user lane falls back to when auth is off."""
    return request.client.host if request.client is not None else None


async def _disconnected(receive: Receive) -> None:
    while True:
        message = await receive()
        if message.get("type") == "http.disconnect":
            return


async def run_until_disconnect(request: Request, cancel: Callable[[], Any], fn: Callable[..., T], *args: Any,
                               **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in the thread pool; when the client disconnects first, ``cancel()`` is called
    (the query stops within DuckDB's next vector) and its error is what this raises."""
    work = asyncio.ensure_future(run_in_threadpool(fn, *args, **kwargs))
    watch = asyncio.ensure_future(_disconnected(request.receive))
    try:
        await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
        if not work.done():
            log.info("client went away: cancelling its query")
            cancel()
        return await work
    finally:
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watch


def write_deadline(write_timeout_seconds: float, running: RunningQuery | None) -> Callable[[], float]:
    """How long one write of a streamed answer may wait for its client: ``server.write_timeout_seconds``,
    never past the query's own timeout (``running``: its :class:`RunningQuery`)."""
    limit = float(write_timeout_seconds)

    def seconds() -> float:
        left = running.remaining_ms()
        return limit if left is None else min(limit, max(0.0, left / 1000.0))

    return seconds


class WatchedStream(Response):
    """A streamed answer whose every write must be taken by the client within ``write_timeout()`` seconds
    (a callable: the query's remaining time, capped by server.write_timeout_seconds); a disconnect or a
    stalled reader ends it, and ``chunks`` is closed on every path."""

    def __init__(self, chunks: Iterator[Any], *, write_timeout: Callable[[], float], media_type: str,
                 headers: dict[str, str]) -> None:
        # as StreamingResponse does: no ``body`` attribute, so no Content-Length (the answer is chunked)
        self.status_code = 200
        self.media_type = media_type
        self.background = None
        self.init_headers(headers)
        self.chunks = chunks
        self.write_timeout = write_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        it = iter(self.chunks)
        try:
            async with anyio.create_task_group() as group:
                async def watch() -> None:
                    await _disconnected(receive)
                    group.cancel_scope.cancel()

                group.start_soon(watch)
                try:
                    await self._write(it, send)
                except Exception as e:  # noqa: BLE001 - a query stopped mid-answer: the body ends unfinished
                    log.info("streamed answer ended early: %s", e)
                finally:
                    group.cancel_scope.cancel()
        finally:
            await run_in_threadpool(_close, it)

    async def _write(self, it: Iterator[Any], send: Send) -> None:
        """Write every chunk; a stalled reader ends it unfinished (uvicorn then closes the connection)."""
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        while True:
            chunk = await run_in_threadpool(next, it, _END)
            if chunk is _END:
                break
            body = chunk.encode(self.charset) if isinstance(chunk, str) else bytes(chunk)
            started = time.monotonic()
            with anyio.move_on_after(max(0.0, self.write_timeout())) as scope:
                await send({"type": "http.response.body", "body": body, "more_body": True})
            if scope.cancelled_caught:
                log.info("client stopped reading for %.1f s: closing its stream", time.monotonic() - started)
                return
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _close(it: Iterator[Any]) -> None:
    close = getattr(it, "close", None)
    if close is not None:
        with contextlib.suppress(Exception):
            close()
