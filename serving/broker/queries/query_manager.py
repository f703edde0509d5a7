"""Running queries: ids, timeouts, admission (a bounded priority queue) and cancellation.

Every query (native or SQL) runs inside :meth:`QueryManager.run`. Like Druid's query scheduler it admits
at most ``server.max_concurrent_queries`` at once; the others wait in a queue ordered by the context's
``priority`` (higher first, then arrival), at most ``server.max_queued_queries`` of them and for at most
``server.query_queue_timeout_ms`` (and never past the query's own timeout) — beyond either, 429 "Query
capacity exceeded". Queries with a negative priority form Druid's "low" lane (``hilo`` laning): they
hold at most ``server.low_priority_percent`` % of the slots, so a batch of background queries cannot
starve dashboards. Each query is registered under its id (``context.queryId`` / ``sqlQueryId`` or a UUID)
from the moment it arrives, and a timer for ``context.timeout`` ms (0 = none), counted from arrival,
interrupts the DuckDB statement in flight (→ 504 "Query timeout"). :meth:`QueryManager.cancel` stops it,
queued or running (→ 500 "Query cancelled"; ``DELETE`` answers 202). Queue depth, waits and running
queries are Prometheus metrics.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import itertools
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import duckdb

from radstack import metrics
from serving.broker.queries.limits import too_large
from serving.errors import DruidError, cancelled, capacity_exceeded, timeout

T = TypeVar("T")
log = logging.getLogger(__name__)

_LONGEST_TIMER_MS = 365 * 24 * 3600 * 1000
#: how long the id of a query whose client went away before it arrived is remembered
ABANDONED_SECONDS = 60.0
#: a stopped query's interrupt is repeated after this, then at doubling intervals up to the maximum
REINTERRUPT_FIRST_SECONDS = 0.02
REINTERRUPT_MAX_SECONDS = 0.5
#: how long, in all, a query that ran out of DuckDB's shared pool waits for the others to leave (it tries again
#: each time those holding the pool then have left: under a sustained attack new ones keep arriving)
OOM_WAIT_SECONDS = 5.0


@dataclass
class RunningQuery:
    """A query in flight. Engines run their statements through :meth:`execute`."""

    query_id: str
    timeout_ms: int
    owner: str | None = None  # the user who sent it (auth on): only they, or STATE WRITE, may cancel it
    lane: str | None = None  # whose share of the slots it takes: the user, or the client address (auth off)
    started: float = field(default_factory=time.monotonic)
    cursors: list[duckdb.DuckDBPyConnection] = field(default_factory=list)
    state: str = "running"  # running | timed_out | cancelled | over_budget
    admitted: bool = False  # holds a slot (False while it waits in the queue)
    stopped_at: float | None = None  # when it was interrupted (memory_guard.py gives a stopped query time to end)
    done: threading.Event = field(default_factory=threading.Event)  # set when it left the manager
    #: after DuckDB's shared pool ran out under this query: wait for the queries that held slots then, and
    #: answer whether there were any and time is left (then it is worth another try); set by
    #: :meth:`QueryManager.run`
    wait_for_memory: Callable[[], bool] = field(default=lambda: False, repr=False)
    waiting_for_memory: bool = False
    #: when it got its slot, or began its latest try after waiting for memory: of two queries that ran out of
    #: the pool, the one trying longer is the likelier hog (:meth:`QueryManager._wait_for_others`)
    tried_at: float = field(default_factory=time.monotonic)
    memory_waited_s: float = 0.0  # what those waits took so far (at most OOM_WAIT_SECONDS in all)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self, cursor: duckdb.DuckDBPyConnection) -> None:
        with self._lock:
            self.cursors.append(cursor)
        self.check()

    def check(self) -> None:
        """Raise if the query was cancelled or ran out of time."""
        if (self.state == "running" and self.timeout_ms > 0
                and (time.monotonic() - self.started) * 1000 >= self.timeout_ms):
            self.state = "timed_out"
        if self.state == "timed_out":
            raise timeout(f"Query [{self.query_id}] timed out after {self.timeout_ms} ms")
        if self.state == "cancelled":
            raise cancelled(f"Query [{self.query_id}] was cancelled")
        if self.state == "over_budget":
            raise too_large(f"Query [{self.query_id}] was stopped: the server's memory went past its budget "
                            "(server.memory_limit + server.memory_headroom) while it ran")

    def remaining_ms(self) -> float | None:
        if self.timeout_ms <= 0:
            return None
        return self.timeout_ms - (time.monotonic() - self.started) * 1000

    def _run(self, cursor: duckdb.DuckDBPyConnection, sql: str, params: Any = None,
             fetch: Callable[[], T] | None = None) -> T | None:
        """Run one statement (and ``fetch`` its rows): an interrupt becomes the right Druid error; DuckDB's
        pool running out while other queries hold it waits for them (:attr:`wait_for_memory`) and tries
        again, as long as that wait has time left."""
        while True:
            self.check()
            try:
                if params is None:
                    cursor.execute(sql)
                else:
                    cursor.execute(sql, params)
                return fetch() if fetch is not None else None
            except duckdb.InterruptException as e:
                self.check()
                raise cancelled(f"Query [{self.query_id}] was interrupted") from e
            except duckdb.OutOfMemoryException:
                if not self.wait_for_memory():
                    raise

    def execute(self, cursor: duckdb.DuckDBPyConnection, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Run one statement, fetch all rows, and turn an interrupt into the right Druid error."""
        rows = self._run(cursor, sql, params, cursor.fetchall)
        self.check()
        return rows or []

    def stream(self, cursor: duckdb.DuckDBPyConnection, sql: str,
               rows: Callable[[], int]) -> Iterator[list[tuple[Any, ...]]]:
        """Run one statement and yield its rows as DuckDB produces them, ``rows()`` at a time (asked before
        each fetch, so the reader can take fewer of wide rows): a streamed answer never holds the whole
        result; interrupts and the timeout act as in :meth:`execute`."""
        self._run(cursor, sql)
        while True:
            self.check()
            try:
                part = cursor.fetchmany(rows())
            except duckdb.InterruptException as e:
                self.check()
                raise cancelled(f"Query [{self.query_id}] was interrupted") from e
            if not part:
                return
            yield part

    def interrupt(self, state: str) -> None:
        """Stop the query. DuckDB forgets an interrupt that arrives between :meth:`check` and the start of
        its next statement (a new statement clears the flag), so the first interrupt keeps repeating it,
        at growing intervals, until the query has left the manager."""
        with self._lock:
            first = self.state == "running"
            if first:
                self.state = state
                self.stopped_at = time.monotonic()
        self._interrupt_cursors()
        if first:
            threading.Thread(target=self._keep_interrupting, name=f"interrupt-{self.query_id[:16]}",
                             daemon=True).start()

    def _interrupt_cursors(self) -> None:
        with self._lock:
            cursors = list(self.cursors)
        for c in cursors:
            with contextlib.suppress(Exception):
                c.interrupt()

    def _keep_interrupting(self) -> None:
        delay = REINTERRUPT_FIRST_SECONDS
        while not self.done.wait(delay):
            self._interrupt_cursors()
            delay = min(delay * 2, REINTERRUPT_MAX_SECONDS)


def native_flag(value: Any) -> bool:
    """A boolean of a native query or its context, as the native engine reads them: ``true`` or
    ``"true"`` (any case); anything else is false."""
    return value is True or (isinstance(value, str) and value.lower() == "true")


class QueryManager:
    def __init__(self, max_concurrent: int = 16, default_timeout_ms: int = 300_000, *, max_queued: int = 128,
                 queue_timeout_ms: int = 60_000, low_priority_percent: int = 50, max_timeout_ms: int = 0,
                 max_per_user: int = 0) -> None:
        self.max_concurrent = max(1, max_concurrent)
        self.max_timeout_ms = max(0, max_timeout_ms)
        # the default never passes the maximum; "none" (0) means the maximum when there is one
        self.default_timeout_ms = (min(default_timeout_ms or self.max_timeout_ms, self.max_timeout_ms)
                                   if self.max_timeout_ms else default_timeout_ms)
        self.max_per_user = max(0, max_per_user)
        self._per_user: dict[str, int] = {}
        self._abandoned: dict[str, float] = {}  # query id → when its client went away before it arrived
        self.max_queued = max(0, max_queued)
        self.queue_timeout_ms = queue_timeout_ms
        self.max_low = max(1, math.ceil(self.max_concurrent * max(0, min(100, low_priority_percent)) / 100))
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._running: dict[str, RunningQuery] = {}
        #: (tried_at, left_at) of the queries that left lately: one at it before a query that then ran out
        #: of the pool may have left just before it looked (its memory is free by then)
        self._departures: collections.deque[tuple[float, float]] = collections.deque(maxlen=256)
        self._active = 0
        self._active_low = 0
        self._waiting: list[tuple[int, int, RunningQuery, bool]] = []  # (-priority, arrival, query, low)
        self._arrivals = itertools.count()

    @staticmethod
    def new_id() -> str:
        return str(uuid.uuid4())

    @staticmethod
    def checked_id(raw: Any, key: str = "queryId") -> str | None:
        """A client-chosen query id, or None when it sent none. It is echoed in a response header, so it
        must be 1–256 printable ASCII characters (no CR/LF, no control or non-ASCII bytes): else 400."""
        if raw is None or raw == "":
            return None
        qid = str(raw)
        if not (len(qid) <= 256 and qid.isascii() and qid.isprintable()):
            raise DruidError(f"context.{key} must be 1-256 printable ASCII characters, got {qid[:60]!r}")
        return qid

    def timeout_of(self, context: dict[str, Any] | None) -> int:
        ctx = context or {}
        raw = ctx.get("timeout")
        if raw is None:
            return self.default_timeout_ms
        try:
            if isinstance(raw, bool):
                raise TypeError(raw)
            ms = int(raw)
        except (TypeError, ValueError, OverflowError) as e:
            raise DruidError(f"context.timeout must be a number of milliseconds, got {raw!r}") from e
        if ms < 0:
            raise DruidError(f"context.timeout must be >= 0, got {ms}")
        if self.max_timeout_ms:
            if ms == 0:  # "no timeout" is the longest one the server allows
                return self.max_timeout_ms
            if ms > self.max_timeout_ms:
                raise DruidError(f"Configured timeout = {ms} is more than enforced limit of {self.max_timeout_ms} "
                                 "(server.max_query_timeout_ms).", category="INVALID_INPUT",
                                 context={"legacyErrorCode": "Query context parse failed"})
        return ms

    @staticmethod
    def priority_of(context: dict[str, Any] | None) -> int:
        """Druid's ``priority`` context key (default 0; higher runs first, negative is the low lane)."""
        raw = (context or {}).get("priority", 0)
        try:
            return int(raw) if not isinstance(raw, bool) else 0
        except (TypeError, ValueError, OverflowError) as e:
            raise DruidError(f"context.priority must be an integer, got {raw!r}") from e

    def _user_has_room(self, rq: RunningQuery) -> bool:
        return not self.max_per_user or rq.lane is None or self._per_user.get(rq.lane, 0) < self.max_per_user

    def _may_start(self, low: bool, rq: RunningQuery) -> bool:
        return (self._active < self.max_concurrent and (not low or self._active_low < self.max_low)
                and self._user_has_room(rq))

    def _first_startable(self) -> RunningQuery | None:
        """The waiting query that goes next: the best-ranked one whose lanes (priority, user) have room."""
        for _, _, rq, low in sorted(self._waiting):
            if self._may_start(low, rq):
                return rq
        return None

    def _admit(self, rq: RunningQuery, low: bool, priority: int) -> None:
        """Wait (bounded) for a slot; called with the lock held."""
        if self._may_start(low, rq) and not any(self._may_start(w_low, w) for _, _, w, w_low in self._waiting):
            return
        if self.max_per_user and rq.lane is not None and \
                sum(1 for _, _, w, _ in self._waiting if w.lane == rq.lane) >= max(1, self.max_queued // 2):
            raise capacity_exceeded(
                f"Too many queries from one user: {self.max_per_user} running and half of "
                f"server.max_queued_queries ({max(1, self.max_queued // 2)}) waiting (server.max_queries_per_user). "
                "Please try your query again later.")
        if len(self._waiting) >= self.max_queued:
            raise capacity_exceeded(
                f"Too many concurrent queries, total query capacity of {self.max_concurrent} exceeded and "
                f"{len(self._waiting)} queries already waiting (server.max_queued_queries). "
                "Please try your query again later.")
        entry = (-priority, next(self._arrivals), rq, low)
        self._waiting.append(entry)
        metrics.BROKER_QUERY_QUEUE_DEPTH.set(len(self._waiting))
        limit_ms = self.queue_timeout_ms if rq.timeout_ms <= 0 else min(self.queue_timeout_ms, rq.timeout_ms)
        deadline = rq.started + limit_ms / 1000.0
        try:
            while self._first_startable() is not rq:
                if rq.state != "running":
                    rq.check()
                left = deadline - time.monotonic()
                if left <= 0:
                    if rq.timeout_ms > 0 and limit_ms >= rq.timeout_ms:
                        rq.state = "timed_out"
                        rq.check()
                    if not self._user_has_room(rq):
                        raise capacity_exceeded(
                            f"Query [{rq.query_id}] waited {limit_ms} ms: its user already runs {self.max_per_user} "
                            "queries (server.max_queries_per_user). Please try your query again later.")
                    raise capacity_exceeded(
                        f"Query [{rq.query_id}] waited {limit_ms} ms for one of {self.max_concurrent} query slots "
                        "(server.query_queue_timeout_ms). Please try your query again later.")
                self._cond.wait(min(left, 1.0))
        finally:
            self._waiting.remove(entry)
            metrics.BROKER_QUERY_QUEUE_DEPTH.set(len(self._waiting))
            self._cond.notify_all()

    @contextlib.contextmanager
    def run(self, query_id: str | None = None, timeout_ms: int | None = None, priority: int = 0,
            owner: str | None = None, client: str | None = None) -> Iterator[RunningQuery]:
        """Hold a slot for one query. Its user lane is ``owner`` (auth on) or else the ``client`` address:
        at most ``server.max_queries_per_user`` of one lane run at once, the others wait their turn."""
        qid = query_id or self.new_id()
        tmo = self.default_timeout_ms if timeout_ms is None else timeout_ms
        low = priority < 0
        rq = RunningQuery(qid, tmo, owner, lane=owner or client)
        rq.wait_for_memory = functools.partial(self._wait_for_others, rq)
        with self._cond:
            if self._abandoned.pop(qid, None) is not None:
                raise cancelled(f"Query [{qid}] was cancelled: its client went away")
            if qid in self._running:  # an id names one running query: a cancel must reach only it
                raise DruidError(f"Query [{qid}] is already running: a query id must be unique while it runs",
                                 category="CONFLICT")
            self._running[qid] = rq
            try:
                self._admit(rq, low, priority)
            except BaseException:
                if self._running.get(qid) is rq:
                    del self._running[qid]
                rq.done.set()
                raise
            self._active += 1
            self._active_low += low
            rq.admitted = True
            rq.tried_at = time.monotonic()
            if rq.lane is not None:
                self._per_user[rq.lane] = self._per_user.get(rq.lane, 0) + 1
            metrics.BROKER_QUERIES_RUNNING.set(self._active)
        metrics.BROKER_QUERY_QUEUE_WAIT.observe(time.monotonic() - rq.started)
        timer: threading.Timer | None = None
        # a timeout beyond a year never fires in practice, and a Timer that long overflows the platform's time_t
        if 0 < tmo <= _LONGEST_TIMER_MS:
            remaining = max(0.0, tmo / 1000.0 - (time.monotonic() - rq.started))
            timer = threading.Timer(remaining, rq.interrupt, args=("timed_out",))
            timer.daemon = True
            timer.start()
        try:
            rq.check()
            yield rq
            rq.check()
        finally:
            if timer is not None:
                timer.cancel()
            with self._cond:
                self._active -= 1
                self._active_low -= low
                if rq.lane is not None:
                    left = self._per_user.get(rq.lane, 1) - 1
                    if left:
                        self._per_user[rq.lane] = left
                    else:
                        self._per_user.pop(rq.lane, None)
                metrics.BROKER_QUERIES_RUNNING.set(self._active)
                if self._running.get(qid) is rq:
                    del self._running[qid]
                if rq.admitted:
                    self._departures.append((rq.tried_at, time.monotonic()))
                rq.done.set()
                self._cond.notify_all()

    def _wait_for_others(self, rq: RunningQuery) -> bool:
        """``rq`` ran out of DuckDB's pool, which every query shares: a small query should not fail because
        a big one holds the pool, so it waits (at most :data:`OOM_WAIT_SECONDS` over all its tries, never
        past its timeout) until the queries that were at it before it — its slot or its latest try came
        later — have ended, then tries again (at once when such a query left after its try began: its
        memory is free). A query waiting so holds no pool (its statement failed) and is not waited for.
        False, DuckDB's error, when there is no such query: it is the one trying longest, the likely hog
        (alone, too big) — so a big query never tries again while a small one waits for it to leave (each
        would wait out the other's budget) — or when the budget is spent."""
        mine = rq.tried_at
        with self._lock:
            holding = [q for q in self._running.values()
                       if q.admitted and q is not rq and not q.waiting_for_memory and q.tried_at <= mine]
            older_left = any(tried <= mine < left for tried, left in self._departures)
            budget = OOM_WAIT_SECONDS - rq.memory_waited_s
            if (not holding and not older_left) or budget <= 0:
                log.info("query %s ran out of DuckDB's pool: %s", rq.query_id,
                         "its wait budget is spent" if budget <= 0 else
                         f"no query at it longer to wait for ({len(self._running) - 1} others in flight)")
                return False
            rq.waiting_for_memory = True  # only now: a query on its way to failing still holds its pool
        try:
            left = rq.remaining_ms()
            limit = budget if left is None else min(budget, left / 1000)
            started = time.monotonic()
            deadline = started + limit
            for q in holding:
                q.done.wait(max(0.0, deadline - time.monotonic()))
            rq.memory_waited_s += max(time.monotonic() - started, 0.01)  # each try costs the budget something
            rq.check()
            rq.tried_at = time.monotonic()
            return True
        finally:
            rq.waiting_for_memory = False

    def cancel(self, query_id: str, may_cancel: Callable[[RunningQuery], bool] | None = None) -> bool:
        """Cancel a running or queued query; False when there is none — or when ``may_cancel`` (auth on:
        its owner or STATE WRITE) refuses it, so another user's running id looks like no query (404)."""
        with self._lock:
            rq = self._running.get(query_id)
        if rq is None:
            return False
        if may_cancel is not None and not may_cancel(rq):
            return False  # another user's query: as if it were not there (404), so ids cannot be probed
        rq.interrupt("cancelled")
        with self._cond:
            self._cond.notify_all()  # a queued query stops waiting
        return True

    def abandon(self, query_id: str) -> None:
        """Its client went away: cancel the query, and if it has not arrived here yet (its thread had not
        started), refuse it when it does (remembered for :data:`ABANDONED_SECONDS`)."""
        with self._lock:
            now = time.monotonic()
            for qid in [q for q, at in self._abandoned.items() if now - at > ABANDONED_SECONDS]:
                del self._abandoned[qid]
            if query_id not in self._running:
                self._abandoned[query_id] = now
                return
        self.cancel(query_id)

    def cancel_all(self) -> None:
        with self._lock:
            running = list(self._running.values())
        for rq in running:
            rq.interrupt("cancelled")
        with self._cond:
            self._cond.notify_all()

    def admitted(self) -> list[RunningQuery]:
        """The queries holding a slot, the longest-running first."""
        with self._lock:
            return sorted((rq for rq in self._running.values() if rq.admitted), key=lambda rq: rq.started)

    def running(self) -> list[str]:
        with self._lock:
            return list(self._running)
