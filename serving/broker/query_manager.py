"""Running queries: ids, timeouts, a concurrency limit and cancellation.

Every query (native or SQL) runs inside :meth:`QueryManager.run`, which admits it (more than
``server.max_concurrent_queries`` at once → 429 "Query capacity exceeded"), registers it under its id
(``context.queryId`` / ``sqlQueryId`` or a generated UUID) and arms a timer for ``context.timeout`` ms
(0 = none) that interrupts the DuckDB statement in flight (→ 504 "Query timeout").
:meth:`QueryManager.cancel` interrupts it on request (→ 500 "Query cancelled"; ``DELETE`` answers 202).
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import duckdb

from serving.errors import DruidError, cancelled, capacity_exceeded, timeout


@dataclass
class RunningQuery:
    """A query in flight. Engines run their statements through :meth:`execute`."""

    query_id: str
    timeout_ms: int
    started: float = field(default_factory=time.monotonic)
    cursors: list[duckdb.DuckDBPyConnection] = field(default_factory=list)
    state: str = "running"  # running | timed_out | cancelled
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

    def remaining_ms(self) -> float | None:
        if self.timeout_ms <= 0:
            return None
        return self.timeout_ms - (time.monotonic() - self.started) * 1000

    def execute(self, cursor: duckdb.DuckDBPyConnection, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Run one statement, fetch all rows, and turn an interrupt into the right Druid error."""
        self.check()
        try:
            if params is None:
                cursor.execute(sql)
            else:
                cursor.execute(sql, params)
            rows = cursor.fetchall()
        except duckdb.InterruptException as e:
            self.check()
            raise cancelled(f"Query [{self.query_id}] was interrupted") from e
        self.check()
        return rows

    def interrupt(self, state: str) -> None:
        with self._lock:
            if self.state == "running":
                self.state = state
            cursors = list(self.cursors)
        for c in cursors:
            with contextlib.suppress(Exception):
                c.interrupt()


class QueryManager:
    def __init__(self, max_concurrent: int = 16, default_timeout_ms: int = 300_000) -> None:
        self.max_concurrent = max_concurrent
        self.default_timeout_ms = default_timeout_ms
        self._lock = threading.Lock()
        self._running: dict[str, RunningQuery] = {}
        self._active = 0

    @staticmethod
    def new_id() -> str:
        return str(uuid.uuid4())

    def timeout_of(self, context: dict[str, Any] | None) -> int:
        ctx = context or {}
        raw = ctx.get("timeout")
        if raw is None:
            return self.default_timeout_ms
        try:
            ms = int(raw)
        except (TypeError, ValueError) as e:
            raise DruidError(f"context.timeout must be a number of milliseconds, got {raw!r}") from e
        if ms < 0:
            raise DruidError(f"context.timeout must be >= 0, got {ms}")
        return ms

    @contextlib.contextmanager
    def run(self, query_id: str | None = None, timeout_ms: int | None = None) -> Iterator[RunningQuery]:
        qid = query_id or self.new_id()
        tmo = self.default_timeout_ms if timeout_ms is None else timeout_ms
        with self._lock:
            if self._active >= self.max_concurrent:
                raise capacity_exceeded(
                    f"Too many concurrent queries, total query capacity of {self.max_concurrent} exceeded. "
                    "Please try your query again later."
                )
            self._active += 1
            rq = RunningQuery(qid, tmo)
            self._running[qid] = rq
        timer: threading.Timer | None = None
        if tmo > 0:
            timer = threading.Timer(tmo / 1000.0, rq.interrupt, args=("timed_out",))
            timer.daemon = True
            timer.start()
        try:
            yield rq
            rq.check()
        finally:
            if timer is not None:
                timer.cancel()
            with self._lock:
                self._active -= 1
                if self._running.get(qid) is rq:
                    del self._running[qid]

    def cancel(self, query_id: str) -> bool:
        with self._lock:
            rq = self._running.get(query_id)
        if rq is None:
            return False
        rq.interrupt("cancelled")
        return True

    def cancel_all(self) -> None:
        with self._lock:
            running = list(self._running.values())
        for rq in running:
            rq.interrupt("cancelled")

    def running(self) -> list[str]:
        with self._lock:
            return list(self._running)
