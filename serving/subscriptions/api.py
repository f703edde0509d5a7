"""``/radstack/v1/subscriptions``: live queries over HTTP (the hub is :mod:`serving.subscriptions.hub`).

- ``POST /radstack/v1/subscriptions`` — body ``{"query": "<Druid SQL>", "context": {…}, "parameters": […],
  "resultFormat": "object"|"array"}`` or ``{"nativeQuery": {…}}``; the query runs once (its error is
  the answer, with Druid's error JSON and status) and is stored: ``200 {"id": …, …}``.
- ``GET /radstack/v1/subscriptions`` — the subscriptions this user may see; ``GET …/{id}`` — one.
- ``GET /radstack/v1/subscriptions/{id}/events`` — Server-Sent Events: ``id: <n>`` and ``data: <the
  complete answer as one line of JSON>`` at connect and at every change; ``event: error`` when the
  query fails now (its ``data`` is Druid's error JSON); ``event: end`` when the subscription is
  deleted or the server stops; a ``: keepalive`` comment every 15 s.
- ``DELETE /radstack/v1/subscriptions/{id}`` — ends it (and every open stream of it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from serving.auth import request_user
from serving.errors import DruidError, invalid_input, not_found, query_error
from serving.subscriptions.hub import Subscription, SubscriptionHub

router = APIRouter()
PREFIX = "/radstack/v1/subscriptions"


def _hub(request: Request) -> SubscriptionHub:
    hub = getattr(request.app.state.ctx, "subscriptions", None)
    if hub is None:
        raise DruidError("Subscriptions are not running", category="SERVICE_UNAVAILABLE")
    return hub


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


def _visible(request: Request, sub_id: str) -> tuple[SubscriptionHub, Subscription]:
    hub = _hub(request)
    sub = hub.get(sub_id)
    if sub is None or not hub.may_see(request_user(request), sub):  # someone else's: as if it did not exist
        raise not_found(f"Subscription [{sub_id}] not found")
    return hub, sub


@router.post(PREFIX)
async def create_subscription(request: Request) -> Response:
    try:
        body = orjson.loads(await request.body())
    except orjson.JSONDecodeError as e:
        raise invalid_input(f"Malformed subscription JSON: {e}") from e
    hub = _hub(request)
    try:
        sub = Subscription.from_request(body, request_user(request))
        stored = await run_in_threadpool(hub.create, sub)
    except DruidError as e:
        raise query_error(e) from None
    return _json({**stored.describe(), "events": f"{PREFIX}/{stored.id}/events"})


@router.get(PREFIX)
async def list_subscriptions(request: Request) -> Response:
    hub = _hub(request)
    return _json([s.describe() for s in hub.list(request_user(request))])


@router.get(PREFIX + "/{sub_id}")
async def get_subscription(sub_id: str, request: Request) -> Response:
    _, sub = _visible(request, sub_id)
    return _json(sub.describe())


@router.delete(PREFIX + "/{sub_id}")
async def delete_subscription(sub_id: str, request: Request) -> Response:
    hub, sub = _visible(request, sub_id)
    await run_in_threadpool(hub.delete, sub.id)
    return _json({"id": sub.id, "deleted": True})


@router.get(PREFIX + "/{sub_id}/events")
async def subscription_events(sub_id: str, request: Request) -> Response:
    hub, sub = _visible(request, sub_id)
    user = request_user(request)
    hub.acquire_stream(user)  # 429 past server.max_streams_per_user

    async def stream() -> AsyncIterator[bytes]:
        try:
            yield b"retry: 2000\n\n"
            async for answer in hub.listen(sub.id):
                if answer is None:
                    yield b": keepalive\n\n"
                    continue
                kind = b"event: error\n" if answer.error else b""
                yield b"id: %d\n%sdata: %s\n\n" % (answer.seq, kind, answer.body)
            yield b"event: end\ndata: " + orjson.dumps({"id": sub.id}) + b"\n\n"
        finally:
            hub.release_stream(user)

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
