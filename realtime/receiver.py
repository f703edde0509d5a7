"""The HTTP event receiver: ``POST /v1/events/{topic}`` → Kafka (RADStack's HTTP front for the producer).

Body: one JSON object, a JSON array of objects, or newline-delimited JSON (one object per line; blank
lines are skipped). Each event must be a JSON object whose timestamp field (``receiver.timestamp_field``,
default ``timestamp``) is epoch millis (a number or a string of digits) or an ISO-8601 instant.

Responses (all JSON):

- ``200 {"accepted": n}`` — every event was acknowledged by Kafka (``acks=all``, idempotent producer).
- ``202 {"accepted": n, "spooled": n}`` — Kafka is away or slow: the events are in the receiver's
  write-ahead spool (``receiver.spool``, on by default) and the drainer delivers them in order, exactly
  once, when Kafka takes them again (a restarted receiver goes on where it stopped).
- ``400 {"accepted": k, "rejected": [{"index": i, "reason": …}, …], …}`` — some events were invalid;
  the ``k`` valid ones of the same request **were delivered** (the body says so). Indexes are positions
  in the array, or among the non-blank lines for NDJSON.
- ``401`` (Basic auth on and missing/wrong), ``403`` (an internal ``__*`` or dead-letter topic: never
  writable), ``404`` (a topic not on the allow-list: ``receiver.topics``, else ``kafka.topics`` and the
  topics the datasource specs read), ``413`` (body larger than ``receiver.max_body_bytes``, or an event
  larger than ``receiver.max_event_bytes`` / Kafka's ``message.max.bytes``: the body lists them; retrying
  cannot help), ``503`` + ``Retry-After`` (the spool is full — or, with the spool off, Kafka is
  unavailable: retry the request).

With the spool on, every accepted event is appended to the spool first (fsync per
``receiver.spool.fsync``), then produced by the drainer; the request waits up to
``receiver.delivery_timeout_ms`` for Kafka's acknowledgement (not at all while Kafka is known to be down).

Event times must fall in the years 1970–9999 (epoch millis 0 … 253402300799999); others are rejected
with the reason, like any invalid event.

``GET /health`` (and Druid's ``/status/health``) answers ``true`` when the process is up.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import orjson
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response

from radstack.browser_guard import BrowserGuardMiddleware
from radstack.config import Settings
from radstack.datasources import load_catalog
from radstack.passwords import GENERATED_ADMIN, generated_admin
from radstack.permissions import Permission, parse_roles, parse_user
from radstack.private_files import private_process
from radstack.sign_in import SignIn, TooManyAttempts
from radstack.spec import SpecError
from radstack.time.event_time import range_error, timestamp_error
from realtime.producer import BatchProducer, KafkaUnavailable, MessageTooLarge
from realtime.spool import Spool, SpoolFull
from realtime.spool_drainer import SpoolDrainer
from realtime.spool_shares import SpoolShareFull, SpoolShares
from realtime.streaming.dlq import dlq_topic

TOPIC_RE = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
MAX_REPORTED_REJECTIONS = 1000
#: bodies larger than this are parsed on a worker thread, at most BIG_PARSES_AT_ONCE at a time (three
#: clients posting 16 MB bodies once moved /health from 2.2 ms to 3.7 s by parsing on the event loop)
INLINE_PARSE_BYTES = 1024 * 1024
BIG_PARSES_AT_ONCE = 2
TOPIC_CACHE_SECONDS = 30.0


class _BadBody(ValueError):
    pass


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json", headers=headers)


def parse_events(body: bytes, timestamp_field: str,
                 max_event_bytes: int = 0) -> tuple[list[bytes], list[dict[str, Any]]]:
    """Split and validate a request body: (serialized valid events, rejections with index + reason;
    an event over ``max_event_bytes`` is rejected with ``"tooLarge": true``).

    Raises ``_BadBody`` when the body as a whole is not JSON/NDJSON."""
    values: list[bytes] = []
    rejected: list[dict[str, Any]] = []
    stripped = body.strip()
    if not stripped:
        raise _BadBody("empty body: send a JSON object, a JSON array of objects, or NDJSON")
    items: list[tuple[Any, bytes | None]]
    try:
        doc = orjson.loads(stripped)
        items = [(e, None) for e in doc] if isinstance(doc, list) else [(doc, stripped)]
    except orjson.JSONDecodeError as whole_error:
        if b"\n" not in stripped:
            raise _BadBody(f"invalid JSON: {whole_error}") from None
        items = []
        for line in stripped.split(b"\n"):
            line = line.strip()
            if not line:
                continue
            try:
                items.append((orjson.loads(line), line))
            except orjson.JSONDecodeError as e:
                items.append((_INVALID, str(e).encode()))
    ts = timestamp_field
    dumps = orjson.dumps
    for i, (event, raw) in enumerate(items):
        if event is _INVALID:
            rejected.append({"index": i, "reason": f"invalid JSON: {raw.decode()}"})  # type: ignore[union-attr]
            continue
        if type(event) is not dict:
            rejected.append({"index": i, "reason": f"not a JSON object (a {_json_type(event)})"})
            continue
        v = event.get(ts, _MISSING)
        if v is _MISSING:
            rejected.append({"index": i, "reason": f"missing timestamp field {ts!r}"})
            continue
        err = range_error(v) if type(v) is int else timestamp_error(v)
        if err is not None:
            rejected.append({"index": i, "reason": err})
            continue
        value = raw if raw is not None else dumps(event)
        if max_event_bytes and len(value) > max_event_bytes:
            rejected.append({"index": i, "tooLarge": True, "reason": (
                f"event is {len(value):,} bytes; the limit is {max_event_bytes:,} "
                "(receiver.max_event_bytes, at most Kafka's message.max.bytes)")})
            continue
        values.append(value)
    return values, rejected


_INVALID = object()
_MISSING = object()


def _json_type(v: Any) -> str:
    return {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}.get(
        type(v), "null" if v is None else type(v).__name__
    )


@dataclass(frozen=True)
class ReceiverUser:
    password_hash: str
    topics: tuple[Permission, ...] | None  # None: every allowed topic

    def may_write(self, topic: str) -> bool:
        return self.topics is None or any(p.allows("TOPIC", topic, "WRITE") for p in self.topics)


def receiver_users(settings: Settings) -> dict[str, ReceiverUser]:
    """``receiver.auth.users`` by name (a plain ``password`` is refused). A user with ``roles`` may write
    only the topics those roles (``receiver.auth.roles``) grant ``TOPIC`` ``WRITE`` on; without roles,
    every allowed topic."""
    auth = settings.receiver.auth
    roles = parse_roles(auth.roles, "receiver.auth")
    users: dict[str, ReceiverUser] = {}
    for i, raw in enumerate(auth.users or []):
        u = parse_user(raw, f"receiver.auth.users[{i}]", roles)
        topics = None if u.roles is None else tuple(p for r in u.roles for p in roles[r])
        users[u.name] = ReceiverUser(u.password_hash, topics)
    if auth.enabled and auth.generate_admin and GENERATED_ADMIN not in users:
        encoded = generated_admin(settings.home, "receiver")
        users[GENERATED_ADMIN] = ReceiverUser(encoded, None)  # every allowed topic
    return users




async def _read_body(request: Request, limit: int) -> bytes | None:
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


def create_app(settings: Settings, producer: BatchProducer | None = None) -> FastAPI:
    """The receiver app. ``producer`` defaults to one built from ``kafka.bootstrap_servers``; it is
    closed on shutdown only when the app created it."""
    limit = int(settings.receiver.max_body_bytes)
    ts_field = str(settings.receiver.timestamp_field)
    auth_on = bool(settings.receiver.auth.enabled)
    users = receiver_users(settings)
    # radstack/sign_in.py: off the event loop, unknown users as slow as wrong passwords, rate-limited
    sign_in = SignIn.for_auth({n: u.password_hash for n, u in users.items()}, settings.receiver.auth)
    delivery_timeout_ms = int(settings.receiver.delivery_timeout_ms)
    max_event = int(settings.receiver.max_event_bytes)
    spool_conf = settings.receiver.spool
    per_client = spool_conf.max_bytes // 4 if spool_conf.max_bytes_per_client < 0 else spool_conf.max_bytes_per_client
    shares = SpoolShares(per_client)  # realtime/spool_shares.py: one client cannot fill the spool
    state: dict[str, Any] = {"producer": producer, "topics": {}, "allowed": (0.0, frozenset(), frozenset()),
                             "spool": None, "drainer": None}
    kafka_conf = {"message.max.bytes": max(1_000_000, max_event + 4096)}

    @asynccontextmanager
    async def lifespan(_app: FastAPI):  # type: ignore[no-untyped-def]
        private_process(settings.home)  # the spool holds events: 0600 (radstack/private_files.py)
        owned = state["producer"] is None and not spool_conf.enabled
        if owned:
            state["producer"] = BatchProducer(
                settings.kafka.clients_bootstrap, delivery_timeout_ms=delivery_timeout_ms, **kafka_conf)
        if spool_conf.enabled:
            state["spool"] = Spool(settings.spool_dir, spool_conf.max_bytes, spool_conf.segment_bytes,
                                   spool_conf.fsync, spool_conf.fsync_interval_ms)
            state["drainer"] = SpoolDrainer(state["spool"], settings.kafka.clients_bootstrap, **kafka_conf).start()
        try:
            yield
        finally:
            if state["drainer"] is not None:
                await asyncio.to_thread(state["drainer"].stop, 5.0)
                state["spool"].close()
            if owned:
                state["producer"].close(timeout=5)

    app = FastAPI(title="radstack event receiver", lifespan=lifespan, docs_url=None, redoc_url=None)

    def _unavailable(reason: str, accepted: int = 0) -> Response:
        return _json(
            503,
            {
                "error": "Kafka unavailable",
                "reason": reason,
                "accepted": accepted,
                "message": "retry the request"
                + (f"; {accepted} event(s) of it were already delivered" if accepted else ""),
            },
            {"Retry-After": "1"},
        )

    def _topic_known(exists: Callable[[str], bool], topic: str) -> bool:
        cache: dict[str, float] = state["topics"]
        now = time.monotonic()
        if cache.get(topic, 0.0) > now:
            return True
        if exists(topic):
            cache[topic] = now + TOPIC_CACHE_SECONDS
            return True
        return bool(settings.kafka.auto_create_topics)

    def _allowed() -> tuple[frozenset[str], frozenset[str]]:
        """(writable topics, dead-letter topics), re-read from the datasource specs every 30 s."""
        at, allowed, dead = state["allowed"]
        if time.monotonic() - at < TOPIC_CACHE_SECONDS and allowed:
            return allowed, dead
        try:
            specs = list(load_catalog(settings).values())
        except (OSError, SpecError):
            specs = []
        spec_topics = {t for spec in specs for t in spec.processing.topics}
        dead = frozenset(dlq_topic(spec, t) for spec in specs for t in spec.processing.topics)
        allowed = frozenset(settings.receiver.topics or (set(settings.kafka.topics) | spec_topics))
        state["allowed"] = (time.monotonic(), allowed, dead)
        return allowed, dead

    def _too_large(rejected: list[dict[str, Any]], accepted: int, detail: str | None = None) -> Response:
        return _json(413, {
            "error": "event too large", "accepted": accepted, "rejectedCount": len(rejected),
            "rejected": rejected[:MAX_REPORTED_REJECTIONS],
            "max_event_bytes": max_event,
            "message": (detail or f"events larger than {max_event:,} bytes are refused") +
                       "; retrying cannot help: split or shrink them" +
                       (f"; {accepted} other event(s) of this request were delivered" if accepted else ""),
        })

    big_parses = asyncio.Semaphore(BIG_PARSES_AT_ONCE)

    @app.get("/health")
    @app.get("/status/health")
    async def health() -> Response:
        return _json(200, True)

    @app.post("/v1/events/{topic}")
    async def post_events(topic: str, request: Request) -> Response:
        try:
            name = await sign_in.authenticate(request.headers.get("authorization"),
                                              request.client.host if request.client else "unknown") if auth_on else None
        except TooManyAttempts as e:
            return _json(429, {"error": "Too Many Requests", "accepted": 0,
                               "message": f"{e.reason} (receiver.auth.max_failed_logins)"},
                         {"Retry-After": str(e.retry_after)})
        user = users.get(name) if name is not None else None
        if auth_on and user is None:
            return _json(401, {"error": "Unauthorized"}, {"WWW-Authenticate": 'Basic realm="radstack"'})
        if user is not None and not user.may_write(topic):
            return _json(403, {"error": "Forbidden", "topic": topic, "accepted": 0,
                               "message": "no role of this user grants TOPIC WRITE on it (receiver.auth.roles)"})
        if not TOPIC_RE.match(topic):
            return _json(400, {"error": "invalid topic name", "topic": topic, "accepted": 0})
        allowed, dead = _allowed()
        if topic.startswith("__") or topic in dead or topic.endswith(".dlq"):
            return _json(403, {"error": "topic not writable", "topic": topic, "accepted": 0,
                               "message": "internal and dead-letter topics are never written through the receiver"})
        if topic not in allowed:
            return _json(404, {"error": "unknown topic", "topic": topic, "accepted": 0,
                               "message": "not a configured source topic (receiver.topics, kafka.topics, datasource specs)"})
        body = await _read_body(request, limit)
        if body is None:
            return _json(413, {"error": "Request Entity Too Large", "max_body_bytes": limit, "accepted": 0})
        try:
            if len(body) > INLINE_PARSE_BYTES:  # off the event loop: /health and small posts keep their turn
                async with big_parses:
                    values, rejected = await asyncio.to_thread(parse_events, body, ts_field, max_event)
            else:
                values, rejected = parse_events(body, ts_field, max_event)
        except _BadBody as e:
            return _json(400, {"error": "invalid body", "reason": str(e), "accepted": 0, "rejected": []})
        if values and state["drainer"] is not None:
            return await _spool(topic, values, rejected, name or (request.client.host if request.client else "unknown"))
        p: BatchProducer = state["producer"]
        accepted = 0
        if values:
            try:
                p.check_available()
                if not _topic_known(p.topic_exists, topic):
                    return _json(404, {"error": "unknown topic", "topic": topic, "accepted": 0})
                result = await p.deliver_async(topic, values)
            except MessageTooLarge as e:
                return _too_large(rejected, 0, f"Kafka refused an event as too large ({e})")
            except KafkaUnavailable as e:
                return _unavailable(str(e))
            if not result.ok and result.too_large:
                return _too_large(rejected, result.delivered, f"Kafka refused {result.failed} event(s) as larger "
                                  f"than its message.max.bytes ({result.error})")
            if not result.ok:
                return _unavailable(result.error or "delivery failed", result.delivered)
            accepted = result.delivered
        return _answer(accepted, rejected)

    def _answer(accepted: int, rejected: list[dict[str, Any]], spooled: int = 0) -> Response:
        if rejected and all(r.get("tooLarge") for r in rejected):
            return _too_large(rejected, accepted)
        where = "accepted into the spool (delivered to Kafka when it takes them)" if spooled else "delivered"
        if rejected:
            return _json(
                400,
                {
                    "error": "invalid events",
                    "accepted": accepted,
                    **({"spooled": spooled} if spooled else {}),
                    "rejectedCount": len(rejected),
                    "rejected": rejected[:MAX_REPORTED_REJECTIONS],
                    "message": (
                        f"{accepted} valid event(s) of this request were {where}; "
                        f"{len(rejected)} rejected event(s) were not: fix and resend only those"
                    ),
                },
            )
        if spooled:
            return _json(202, {"accepted": accepted, "spooled": spooled, "message": (
                "Kafka is unavailable or slow: the events are in the receiver's spool and are delivered "
                "in order, exactly once, as soon as Kafka takes them; do not resend")})
        return _json(200, {"accepted": accepted})

    async def _spool(topic: str, values: list[bytes], rejected: list[dict[str, Any]], client: str) -> Response:
        drainer: SpoolDrainer = state["drainer"]
        if not drainer.kafka_down:
            try:
                if not _topic_known(drainer.topic_exists, topic):
                    return _json(404, {"error": "unknown topic", "topic": topic, "accepted": 0})
            except KafkaUnavailable:
                pass  # a configured topic: spool it, Kafka will have it when it is back
        spool: Spool = state["spool"]
        nbytes = sum(len(v) for v in values)
        try:
            shares.check(client, nbytes, spool.checkpoint.committed)
        except SpoolShareFull as e:
            return _json(503, {"error": "spool share full", "reason": str(e), "accepted": 0,
                               "message": "Kafka has not taken this client's earlier events yet: retry the request"},
                         {"Retry-After": "5"})
        try:
            entry = await asyncio.to_thread(spool.append, topic, values)
            shares.added(client, entry.last_seq, nbytes)
        except SpoolFull as e:
            return _json(503, {"error": "spool full", "reason": str(e), "accepted": 0,
                               "message": "Kafka has been away long enough to fill the receiver's spool: retry the request"},
                         {"Retry-After": "5"})
        wait = 0.0 if drainer.kafka_down else delivery_timeout_ms / 1000.0
        delivered = await drainer.wait_committed(entry.last_seq, wait)
        dead = drainer.dead_in(entry.first_seq, entry.last_seq) if delivered else []
        if dead:
            refused = [{"index": -1, "seq": seq, "tooLarge": "TOO_LARGE" in why, "reason": why} for seq, why in dead]
            accepted, detail = len(values) - len(dead), (
                f"Kafka refused {len(dead)} event(s) for good; they are kept in the spool's dead-letter folder")
            if all(r["tooLarge"] for r in refused):
                return _too_large(rejected + refused, accepted, detail)
            return _json(400, {"error": "events refused by Kafka", "accepted": accepted, "rejectedCount": len(dead),
                               "rejected": (rejected + refused)[:MAX_REPORTED_REJECTIONS],
                               "message": f"{detail}; retrying cannot help"})
        return _answer(len(values), rejected, 0 if delivered else len(values))

    # other websites: a page in a browser cannot post events or rebind a name to it (radstack/browser_guard.py)
    app.add_middleware(BrowserGuardMiddleware, allowed_hosts=settings.receiver.allowed_hosts,
                       cors_allowed_origins=settings.receiver.cors_allowed_origins, section="receiver",
                       bind_host=settings.receiver.host)
    return app


def serve(settings: Settings, host: str | None = None, port: int | None = None) -> None:
    """Run the receiver in this process (``radctl receiver``)."""

    uvicorn.run(
        create_app(settings),
        host=host or str(settings.receiver.host),
        port=int(port or settings.receiver.port),
        log_level="warning",
        access_log=False,
        # X-Forwarded-For only from the proxies listed (uvicorn trusts loopback's by default)
        proxy_headers=bool(settings.receiver.trusted_proxies),
        forwarded_allow_ips=",".join(settings.receiver.trusted_proxies) or None,
    )
