"""The process's memory budget, enforced for every request: ``server.memory_limit`` (DuckDB's buffer pool
and operators) plus ``server.memory_headroom`` (Python, answers on their way out).

DuckDB bounds what its buffer manager tracks; a value built inside an expression, an aggregate's growing
list or a Python UDF's result is not tracked by it, and :mod:`serving.broker.sql.rules.value_limits` only
bounds each *value*. So a thread samples the process's resident memory every :data:`INTERVAL_SECONDS`; past
the budget it stops the query that has run longest among those the process grew under (by more than
:data:`GROWTH_BYTES` since the guard first saw them: a query that did not add memory is not blamed for a
full buffer pool) — DuckDB's interrupt, between two vectors of 2,048 rows — which answers Druid's
resource-limit error (400); it gives freed memory back to the system and goes on, one query at a time,
each given :data:`GRACE_SECONDS` to end before the next is stopped. When no query runs, it gives freed heap
back after the process grew by :data:`TRIM_BYTES` (a large answer leaves its pages behind otherwise). Stopped queries and the
peak are Prometheus metrics (``radstack_memory_guard_stops_total``, ``radstack_process_resident_bytes``).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import threading
import time

from radstack import metrics
from serving.broker.queries.query_manager import QueryManager

log = logging.getLogger(__name__)

INTERVAL_SECONDS = 0.02
GRACE_SECONDS = 0.5
GROWTH_BYTES = 32 * 2**20
#: with no query running, freed heap is given back once the process has grown this much since the last time
TRIM_BYTES = 64 * 2**20
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes() -> int:
    """This process's resident memory (``/proc/self/statm``; 0 where there is none)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
        return 0


def _give_back() -> None:
    """Return freed heap pages to the system (glibc's malloc_trim), so the next sample sees them gone."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class MemoryGuard:
    def __init__(self, queries: QueryManager, budget_bytes: int) -> None:
        self.queries = queries
        self.budget = budget_bytes
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._seen: dict[str, int] = {}  # query id → resident bytes when the guard first saw it running
        self._trimmed_at = 0  # resident bytes after the last trim

    def start(self) -> None:
        if self.budget <= 0 or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._loop, name="memory-guard", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _loop(self) -> None:
        while not self._stop.wait(INTERVAL_SECONDS):
            rss = resident_bytes()
            metrics.PROCESS_RESIDENT_BYTES.set(rss)
            self.sample(rss)

    def sample(self, rss: int) -> bool:
        """One look: remember new queries' starting point; past the budget, :meth:`relieve`."""
        running = self.queries.admitted()
        ids = {rq.query_id for rq in running}
        for qid in [q for q in self._seen if q not in ids]:
            del self._seen[qid]
        for rq in running:
            self._seen.setdefault(rq.query_id, rss)
        if not running and rss > self._trimmed_at + TRIM_BYTES:  # idle, and grown since: give freed heap back
            _give_back()
            self._trimmed_at = resident_bytes()
            return False
        return rss > self.budget and self.relieve(rss)

    def relieve(self, rss: int) -> bool:
        """Stop the longest-running query the process grew under (unless one stopped less than
        GRACE_SECONDS ago is still ending); True when one was stopped."""
        now = time.monotonic()
        running = self.queries.admitted()
        if any(rq.stopped_at is not None and now - rq.stopped_at < GRACE_SECONDS for rq in running):
            return False
        _give_back()
        rss = resident_bytes()
        if rss <= self.budget:
            return False
        for rq in running:
            if rq.state == "running" and rss - self._seen.get(rq.query_id, rss) > GROWTH_BYTES:
                log.warning("memory guard: resident %d MiB > budget %d MiB: stopping query %s (running %.1f s)",
                            rss >> 20, self.budget >> 20, rq.query_id, now - rq.started)
                rq.interrupt("over_budget")
                metrics.MEMORY_GUARD_STOPS.inc()
                return True
        return False
