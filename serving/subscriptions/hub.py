"""Live queries: a subscription is a Druid SQL or native query whose complete answer the server pushes
to its listeners at connect and again whenever it changes.

- A subscription is re-run when the segments of a datasource it reads change in the broker (a new or
  grown real-time segment, a handoff, a batch publish, a compaction, a task: every swap of the views),
  and, when its SQL reads the current time (``CURRENT_TIMESTAMP``, ``CURRENT_DATE``, ``NOW()``: a
  sliding window), every ``server.subscription_tick_ms`` as well. The answer is pushed only when it
  differs from the last one pushed.
- Subscriptions with the same query, context and user share one evaluation: a hundred dashboards on
  the same top-k cost one query per change.
- They are stored in the metadata store (``radstack_subscriptions``) and survive a restart; they run
  with their creator's permissions and through the broker's query manager (its slots and timeouts).
- A listener holds only the newest answer: a slow client skips answers, it never makes the server
  buffer them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import orjson

from radstack.storage.metadata import MetadataStore
from serving.auth import User
from serving.broker.native import datasource_names, run_native_query
from serving.broker.sql.engine import execute
from serving.broker.sql.request import authorizer, context_and_parameters, reader, stringify_arrays
from serving.broker.sql.result_formats import ResultWriter
from serving.broker.store.state import BrokerState, QueryableBroker
from serving.errors import DruidError, internal_error, invalid_input, query_error

log = logging.getLogger(__name__)

_NOW_RE = re.compile(r"\b(CURRENT_TIMESTAMP|CURRENT_DATE|NOW\s*\(|LOCALTIMESTAMP)", re.IGNORECASE)
FORMATS = ("object", "array")  # one line of JSON each: what an SSE ``data:`` line can carry


@dataclass(frozen=True)
class Subscription:
    id: str
    created: str
    sql: str | None = None
    native: dict[str, Any] | None = None
    context: dict[str, Any] = field(default_factory=dict)
    parameters: list[Any] = field(default_factory=list)
    result_format: str = "object"
    user: str | None = None

    @classmethod
    def from_request(cls, body: Any, user: User | None) -> Subscription:
        """Validate a ``POST /radstack/v1/subscriptions`` body (Druid's SQL request fields, or a native
        query under ``nativeQuery``)."""
        if not isinstance(body, dict):
            raise invalid_input("A subscription must be a JSON object with 'query' (Druid SQL) or 'nativeQuery'")
        sql, native = body.get("query"), body.get("nativeQuery")
        if (sql is None) == (native is None):
            raise invalid_input("Give exactly one of 'query' (Druid SQL) and 'nativeQuery' (a native query object)")
        if sql is not None and (not isinstance(sql, str) or not sql.strip()):
            raise invalid_input("'query' must be a non-empty string of Druid SQL")
        if native is not None and not isinstance(native, dict):
            raise invalid_input("'nativeQuery' must be a JSON object")
        context, parameters = context_and_parameters(body)
        fmt = body.get("resultFormat") or "object"
        if fmt not in FORMATS:
            raise invalid_input(f"resultFormat of a subscription must be one of {list(FORMATS)}")
        return cls(uuid.uuid4().hex, "", sql, native, context, parameters, fmt, user.name if user else None)

    @classmethod
    def from_payload(cls, sub_id: str, created: str, payload: dict[str, Any]) -> Subscription:
        return cls(sub_id, created, payload.get("query"), payload.get("nativeQuery"), payload.get("context") or {},
                   payload.get("parameters") or [], payload.get("resultFormat") or "object", payload.get("user"))

    def payload(self) -> dict[str, Any]:
        out: dict[str, Any] = {"context": self.context, "user": self.user}
        if self.sql is not None:
            out.update(query=self.sql, parameters=self.parameters, resultFormat=self.result_format)
        else:
            out["nativeQuery"] = self.native
        return out

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "created": self.created, **{k: v for k, v in self.payload().items() if k != "user"},
                "owner": self.user}

    @property
    def key(self) -> bytes:
        """Equal for subscriptions that must get the same answer (query, context, user)."""
        p = self.payload()
        p["context"] = {k: v for k, v in self.context.items() if k not in ("sqlQueryId", "queryId")}
        return orjson.dumps(p, option=orjson.OPT_SORT_KEYS)

    @property
    def time_dependent(self) -> bool:
        return self.sql is not None and _NOW_RE.search(self.sql) is not None


@dataclass
class Answer:
    """One pushed answer: the JSON rows, or a Druid error."""

    seq: int
    body: bytes
    error: bool = False


class Listener:
    """One connected client: keeps only the newest answer."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.latest: Answer | None = None
        self.closed = False
        self.needs_first = False  # connected while no current answer was known: gets the next one in any case
        self._event = asyncio.Event()

    def offer(self, answer: Answer | None) -> None:
        """From any thread: ``None`` ends the stream."""
        def put() -> None:
            if answer is None:
                self.closed = True
            else:
                self.latest = answer
            self._event.set()
        with contextlib.suppress(RuntimeError):  # the loop is gone: the client left
            self.loop.call_soon_threadsafe(put)

    async def next(self, timeout: float) -> Answer | None:
        """The next answer; None at the end or after ``timeout`` s without one (check :attr:`closed`)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), timeout)
        self._event.clear()
        answer, self.latest = self.latest, None
        return answer


@dataclass
class _Group:
    """Subscriptions sharing one evaluation."""

    sample: Subscription
    ids: set[str] = field(default_factory=set)
    last: Answer | None = None
    datasources: frozenset[str] | None = None  # None: not known yet (re-run on any change)
    dirty: bool = True
    next_tick: float = 0.0


class LiveBroker(QueryableBroker, Protocol):
    """The broker as the hub needs it: queryable, its current state, and a call after every swap of its views."""

    @property
    def state(self) -> BrokerState: ...

    def on_change(self, listener: Callable[[], None]) -> None: ...


class SubscriptionHub:
    """The subscriptions of one server: storage, evaluation thread, listeners."""

    def __init__(self, broker: LiveBroker, metadata: MetadataStore, users: Mapping[str, User] | None = None,
                 max_subscriptions: int = 1000, tick_ms: int = 1000, threads: int = 2, *,
                 per_user: int = 100, streams_per_user: int = 20, max_answer_bytes: int = 16 * 1024 * 1024) -> None:
        self.broker = broker
        self.metadata = metadata
        self.users = dict(users or {})
        self.auth = users is not None
        self.max_subscriptions = max_subscriptions
        self.per_user = per_user
        self.streams_per_user = streams_per_user
        self.max_answer_bytes = max_answer_bytes
        self._streams: dict[str | None, int] = {}
        self.tick = tick_ms / 1000.0
        self._subs: dict[str, Subscription] = {}
        self._groups: dict[bytes, _Group] = {}
        self._listeners: dict[str, set[Listener]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._fingerprints: dict[str, tuple[Any, ...]] | None = None
        self._thread: threading.Thread | None = None
        self.evaluations = 0
        self._pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="radstack-subscription")
        broker.on_change(self._wake.set)

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> None:
        for sub_id, created, payload in self.metadata.subscriptions():
            self._add(Subscription.from_payload(sub_id, created, payload))
        self._thread = threading.Thread(target=self._loop, name="radstack-subscriptions", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.close_streams()

    def close_streams(self) -> None:
        """End every open event stream (``event: end``): the first step of a shutdown, so the server
        need not wait for clients that would listen forever. Clients reconnect to a new process."""
        with self._lock:
            listeners = [x for ls in self._listeners.values() for x in ls]
        for x in listeners:
            x.offer(None)

    # -- subscriptions ----------------------------------------------------------------------------
    def create(self, sub: Subscription) -> Subscription:
        """Check that the query runs (its error is the caller's answer), store it, return it."""
        with self._lock:
            if len(self._subs) >= self.max_subscriptions:
                raise invalid_input(f"This server keeps at most {self.max_subscriptions} subscriptions "
                                    "(server.max_subscriptions): delete some first")
            if self.auth and sum(s.user == sub.user for s in self._subs.values()) >= self.per_user:
                raise DruidError(f"User [{sub.user}] keeps {self.per_user} subscriptions already "
                                 "(server.max_subscriptions_per_user): delete some first", category="CAPACITY_EXCEEDED")
        body, datasources = self._evaluate(sub)
        created = self.metadata.insert_subscription(sub.id, sub.payload())
        stored = replace(sub, created=created)
        group = self._add(stored)
        with self._lock:
            if group.last is None:
                group.last, group.datasources, group.dirty = Answer(1, body), datasources, False
                group.next_tick = time.monotonic() + self.tick
        return stored

    def _add(self, sub: Subscription) -> _Group:
        with self._lock:
            self._subs[sub.id] = sub
            group = self._groups.setdefault(sub.key, _Group(sub))
            group.ids.add(sub.id)
            return group

    def get(self, sub_id: str) -> Subscription | None:
        return self._subs.get(sub_id)

    def list(self, user: User | None) -> list[Subscription]:
        return [s for s in self._subs.values() if self.may_see(user, s)]

    def may_see(self, user: User | None, sub: Subscription) -> bool:
        """Its owner, or a user who may write the server's configuration; everyone without auth."""
        return user is None or sub.user == user.name or user.can("CONFIG", "CONFIG", "WRITE")

    def delete(self, sub_id: str) -> bool:
        with self._lock:
            sub = self._subs.pop(sub_id, None)
            if sub is None:
                return False
            group = self._groups.get(sub.key)
            if group is not None:
                group.ids.discard(sub_id)
                if not group.ids:
                    del self._groups[sub.key]
            listeners = self._listeners.pop(sub_id, set())
        self.metadata.delete_subscription(sub_id)
        for x in listeners:
            x.offer(None)
        return True

    def acquire_stream(self, user: User | None) -> None:
        """Count one more open event stream of ``user`` (429 past ``server.max_streams_per_user``); the
        caller calls :meth:`release_stream` when it ends. Without auth every client counts as one user."""
        key = user.name if user is not None else None
        with self._lock:
            if key is not None and self._streams.get(key, 0) >= self.streams_per_user:
                raise DruidError(f"User [{key}] has {self.streams_per_user} event streams open already "
                                 "(server.max_streams_per_user): close one first", category="CAPACITY_EXCEEDED")
            self._streams[key] = self._streams.get(key, 0) + 1

    def release_stream(self, user: User | None) -> None:
        key = user.name if user is not None else None
        with self._lock:
            left = self._streams.get(key, 0) - 1
            if left > 0:
                self._streams[key] = left
            else:
                self._streams.pop(key, None)

    async def listen(self, sub_id: str, keepalive: float = 15.0) -> AsyncIterator[Answer | None]:
        """The answers of one subscription for one client: the current one first; ``None`` now and then
        (every ``keepalive`` s without an answer) so the caller can send a keep-alive."""
        listener = Listener(asyncio.get_running_loop())
        with self._lock:
            sub = self._subs.get(sub_id)
            if sub is None:
                return
            self._listeners.setdefault(sub_id, set()).add(listener)
            group = self._groups[sub.key]
            first = None if group.dirty else group.last
            if first is None:
                group.dirty = listener.needs_first = True
                self._wake.set()
        try:
            if first is not None:
                yield first
            while not listener.closed:
                answer = await listener.next(keepalive)
                if listener.closed:
                    return
                if answer is not None and first is not None and answer.seq <= first.seq:
                    continue  # already sent as the first answer
                yield answer
        finally:
            with self._lock:
                ls = self._listeners.get(sub_id)
                if ls is not None:
                    ls.discard(listener)
                    if not ls:
                        del self._listeners[sub_id]

    # -- evaluation -------------------------------------------------------------------------------
    def _user(self, sub: Subscription) -> User | None:
        if not self.auth:
            return None
        user = self.users.get(sub.user or "")
        if user is None:
            raise DruidError(f"Forbidden: the subscription's owner [{sub.user}] is no longer a user of this server",
                             category="FORBIDDEN")
        return user

    def _evaluate(self, sub: Subscription) -> tuple[bytes, frozenset[str] | None]:
        """The answer as JSON (what ``/druid/v2/sql`` or ``/druid/v2`` would return) and the datasources
        it read (None: unknown, e.g. only system tables)."""
        user = self._user(sub)
        with self._lock:
            self.evaluations += 1
        if sub.native is not None:
            rows = run_native_query(self.broker, sub.native, user=user)
            names = datasource_names(sub.native.get("dataSource"))
            body = orjson.dumps(rows, option=orjson.OPT_SERIALIZE_NUMPY)
            self._check_size(body)
            return body, frozenset(names) or None
        manager = self.broker.queries
        context = {**sub.context, "sqlQueryId": manager.new_id()}
        with manager.run(context["sqlQueryId"], manager.timeout_of(context), manager.priority_of(context)) as running:
            result = execute(self.broker, sub.sql or "", context=context, parameters=sub.parameters,
                             metadata=self.metadata, running=running, authorize=authorizer(user), can_read=reader(user))
            try:
                writer = ResultWriter(sub.result_format, result.columns, stringify_arrays=stringify_arrays(context))
                parts, size = [], 0
                for chunk in writer.stream(result.batches()):  # stopped as soon as it passes the cap
                    size += len(chunk)
                    if size > self.max_answer_bytes:
                        raise self._too_big(size, whole=False)
                    parts.append(chunk)
                body = b"".join(parts)
            finally:
                result.close()
        tr = result.translation
        return body.rstrip(b"\n"), (frozenset(tr.datasources) if tr.datasources and not tr.system_tables else None)

    def _check_size(self, body: bytes) -> None:
        if len(body) > self.max_answer_bytes:
            raise self._too_big(len(body), whole=True)

    def _too_big(self, size: int, *, whole: bool) -> Exception:
        has = f"has {size:,} bytes" if whole else f"passed {size:,} bytes (it was stopped there)"
        return invalid_input(f"The subscription's answer {has}, more than server.max_subscription_answer_bytes "
                             f"({self.max_answer_bytes:,}): narrow the query")

    def _changed_datasources(self) -> set[str] | None:
        """Datasources whose served segments changed since the last call (None on the first call)."""
        state = self.broker.state
        now = {ds: tuple((c.segment_id, c.clip.start, c.clip.end) for c in st.chunks)
               for ds, st in state.datasources.items()}
        before, self._fingerprints = self._fingerprints, now
        if before is None:
            return None
        return {ds for ds in now.keys() | before.keys() if now.get(ds) != before.get(ds)}

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._next_wait())
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.run_once()
            except Exception:  # noqa: BLE001 - the loop must outlive any one query
                log.exception("subscription pass failed")

    def _next_wait(self) -> float:
        with self._lock:
            ticks = [g.next_tick for g in self._groups.values()
                     if g.sample.time_dependent and any(i in self._listeners for i in g.ids)]
        return max(0.01, min(ticks) - time.monotonic()) if ticks else 5.0

    def run_once(self) -> int:
        """Re-run every listened-to group that is due (``server.subscription_threads`` at once); push
        changed answers. Returns the number of answers handed to listeners."""
        changed = self._changed_datasources()
        now = time.monotonic()
        with self._lock:
            due = []
            for g in self._groups.values():
                if not any(i in self._listeners for i in g.ids):
                    if changed is None or g.datasources is None or changed & g.datasources:
                        g.dirty = True  # nobody listens: re-run when someone connects
                    continue
                if (g.dirty or changed is None or g.datasources is None or bool(changed & g.datasources)
                        or (g.sample.time_dependent and now >= g.next_tick)):
                    due.append(g)
        return sum(self._pool.map(self._refresh_group, due))

    def _refresh_group(self, g: _Group) -> int:
        """Re-run one group; push its answer when it changed (or to clients still waiting for a first)."""
        try:
            body, datasources = self._evaluate(g.sample)
            error = False
        except DruidError as e:
            body, datasources, error = orjson.dumps(query_error(e).to_json()), g.datasources, True
        except Exception as e:  # noqa: BLE001 - a planner bug must not stop the other subscriptions
            body = orjson.dumps(internal_error(e, query_id=g.sample.id).to_json())
            datasources, error = g.datasources, True
        with self._lock:
            g.dirty = False
            g.datasources = datasources
            g.next_tick = time.monotonic() + self.tick
            listeners = [x for i in g.ids for x in self._listeners.get(i, ())]
            if g.last is not None and g.last.body == body and g.last.error == error:
                listeners = [x for x in listeners if x.needs_first]  # unchanged: only to new clients
            else:
                g.last = Answer((g.last.seq if g.last else 0) + 1, body, error)
            answer = g.last
        for x in listeners:
            x.needs_first = False
            x.offer(answer)
        return len(listeners)
