"""``POST /v1/events/{topic}``: who may write, to which topic, the body's events, then Kafka or the spool.
Every refusal is raised (:class:`realtime.receiver.answers.Refusal`) and answered by the app's handler."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from radstack.config import Settings
from radstack.sign_in import SignIn, TooManyAttempts
from realtime.producer import KafkaUnavailable, MessageTooLarge
from realtime.receiver.answers import (
    MAX_REPORTED_REJECTIONS,
    Refusal,
    delivered,
    too_large,
    unavailable,
    unknown_topic,
)
from realtime.receiver.events import BadBody, parse_events
from realtime.receiver.state import ReceiverState
from realtime.receiver.users import receiver_users
from realtime.spool import SpoolFull
from realtime.spool_shares import SpoolShareFull, SpoolShares

TOPIC_RE = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
#: bodies larger than this are parsed on a worker thread, at most BIG_PARSES_AT_ONCE at a time (three
#: clients posting 16 MB bodies once moved /health from 2.2 ms to 3.7 s by parsing on the event loop)
INLINE_PARSE_BYTES = 1024 * 1024
BIG_PARSES_AT_ONCE = 2


async def read_body(request: Request, limit: int) -> bytes | None:
    """The body, or None when it is larger than ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


class EventPosting:
    """The route's work for one app (its settings, users, sign-in and spool shares)."""

    def __init__(self, settings: Settings, state: ReceiverState) -> None:
        conf = settings.receiver
        self.state = state
        self.limit = int(conf.max_body_bytes)
        self.ts_field = str(conf.timestamp_field)
        self.auth_on = bool(conf.auth.enabled)
        self.users = receiver_users(settings)
        # radstack/sign_in.py: off the event loop, unknown users as slow as wrong passwords, rate-limited
        self.sign_in = SignIn.for_auth({n: u.password_hash for n, u in self.users.items()}, conf.auth)
        self.delivery_timeout_ms = int(conf.delivery_timeout_ms)
        self.max_event = int(conf.max_event_bytes)
        spool = conf.spool
        per_client = spool.max_bytes // 4 if spool.max_bytes_per_client < 0 else spool.max_bytes_per_client
        self.shares = SpoolShares(per_client)  # realtime/spool_shares.py: one client cannot fill the spool
        self.big_parses = asyncio.Semaphore(BIG_PARSES_AT_ONCE)

    async def post(self, topic: str, request: Request) -> Response:
        client = request.client.host if request.client else "unknown"
        name = await self._signed_in(request, client)
        self._check_topic(topic, name)
        body = await read_body(request, self.limit)
        if body is None:
            raise Refusal(413, "Request Entity Too Large", max_body_bytes=self.limit, accepted=0)
        values, rejected = await self._events(body)
        if values and self.state.drainer is not None:
            return await self._spool(topic, values, rejected, name or client)
        accepted = await self._deliver(topic, values, rejected) if values else 0
        return delivered(accepted, rejected, self.max_event)

    async def _signed_in(self, request: Request, client: str) -> str | None:
        if not self.auth_on:
            return None
        try:
            name = await self.sign_in.authenticate(request.headers.get("authorization"), client)
        except TooManyAttempts as e:
            raise Refusal(429, "Too Many Requests", accepted=0, headers={"Retry-After": str(e.retry_after)},
                          message=f"{e.reason} (receiver.auth.max_failed_logins)") from None
        if name is None or name not in self.users:
            raise Refusal(401, "Unauthorized", headers={"WWW-Authenticate": 'Basic realm="radstack"'})
        return name

    def _check_topic(self, topic: str, name: str | None) -> None:
        user = self.users.get(name) if name is not None else None
        if user is not None and not user.may_write(topic):
            raise Refusal(403, "Forbidden", topic=topic, accepted=0,
                          message="no role of this user grants TOPIC WRITE on it (receiver.auth.roles)")
        if not TOPIC_RE.match(topic):
            raise Refusal(400, "invalid topic name", topic=topic, accepted=0)
        allowed, dead = self.state.allowed()
        if topic.startswith("__") or topic in dead or topic.endswith(".dlq"):
            raise Refusal(403, "topic not writable", topic=topic, accepted=0,
                          message="internal and dead-letter topics are never written through the receiver")
        if topic not in allowed:
            raise unknown_topic(topic, "not a configured source topic (receiver.topics, kafka.topics, datasource specs)")

    async def _events(self, body: bytes) -> tuple[list[bytes], list[dict[str, Any]]]:
        try:
            if len(body) > INLINE_PARSE_BYTES:  # off the event loop: /health and small posts keep their turn
                async with self.big_parses:
                    return await asyncio.to_thread(parse_events, body, self.ts_field, self.max_event)
            return parse_events(body, self.ts_field, self.max_event)
        except BadBody as e:
            raise Refusal(400, "invalid body", reason=str(e), accepted=0, rejected=[]) from None

    async def _deliver(self, topic: str, values: list[bytes], rejected: list[dict[str, Any]]) -> int:
        """Produce straight to Kafka (the spool is off): the number delivered, or a refusal."""
        p = self.state.producer
        assert p is not None  # the spool is off: ReceiverState.open made or was given one
        try:
            p.check_available()
            if not self.state.topic_known(p.topic_exists, topic):
                raise unknown_topic(topic)
            result = await p.deliver_async(topic, values)
        except MessageTooLarge as e:
            raise too_large(rejected, 0, self.max_event, f"Kafka refused an event as too large ({e})") from None
        except KafkaUnavailable as e:
            raise unavailable(str(e)) from None
        if not result.ok and result.too_large:
            raise too_large(rejected, result.delivered, self.max_event, f"Kafka refused {result.failed} event(s) "
                            f"as larger than its message.max.bytes ({result.error})")
        if not result.ok:
            raise unavailable(result.error or "delivery failed", result.delivered)
        return result.delivered

    async def _spool(self, topic: str, values: list[bytes], rejected: list[dict[str, Any]], client: str) -> Response:
        drainer, spool = self.state.drainer, self.state.spool
        assert drainer is not None and spool is not None  # the spool is on
        if not drainer.kafka_down:
            try:
                if not self.state.topic_known(drainer.topic_exists, topic):
                    raise unknown_topic(topic)
            except KafkaUnavailable:
                pass  # a configured topic: spool it, Kafka will have it when it is back
        nbytes = sum(len(v) for v in values)
        try:
            self.shares.check(client, nbytes, spool.checkpoint.committed)
        except SpoolShareFull as e:
            raise Refusal(503, "spool share full", reason=str(e), accepted=0, headers={"Retry-After": "5"},
                          message="Kafka has not taken this client's earlier events yet: retry the request") from None
        try:
            entry = await asyncio.to_thread(spool.append, topic, values)
            self.shares.added(client, entry.last_seq, nbytes)
        except SpoolFull as e:
            raise Refusal(503, "spool full", reason=str(e), accepted=0, headers={"Retry-After": "5"},
                          message="Kafka has been away long enough to fill the receiver's spool: "
                                  "retry the request") from None
        wait = 0.0 if drainer.kafka_down else self.delivery_timeout_ms / 1000.0
        taken = await drainer.wait_committed(entry.last_seq, wait)
        dead = drainer.dead_in(entry.first_seq, entry.last_seq) if taken else []
        if dead:
            refused = [{"index": -1, "seq": seq, "tooLarge": "TOO_LARGE" in why, "reason": why} for seq, why in dead]
            accepted, detail = len(values) - len(dead), (
                f"Kafka refused {len(dead)} event(s) for good; they are kept in the spool's dead-letter folder")
            if all(r["tooLarge"] for r in refused):
                raise too_large(rejected + refused, accepted, self.max_event, detail)
            raise Refusal(400, "events refused by Kafka", accepted=accepted, rejectedCount=len(dead),
                          rejected=(rejected + refused)[:MAX_REPORTED_REJECTIONS],
                          message=f"{detail}; retrying cannot help")
        return delivered(len(values), rejected, self.max_event, 0 if taken else len(values))
