"""The memory guard stops the longest-running query the process grew under, one at a time; a query under
which memory did not grow is never blamed (a full buffer pool is not a query's doing)."""

from __future__ import annotations

import threading
import time

from serving.broker.queries.memory_guard import MemoryGuard, resident_bytes
from serving.broker.queries.query_manager import QueryManager
from serving.errors import DruidError


def _running(qm: QueryManager, qid: str, started: threading.Event, stop: threading.Event,
             errors: dict[str, DruidError]) -> threading.Thread:
    def run() -> None:
        try:
            with qm.run(qid, 0) as rq:
                started.set()
                while not stop.is_set():
                    rq.check()
                    time.sleep(0.01)
        except DruidError as e:
            errors[qid] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_the_oldest_query_that_grew_memory_is_stopped_with_a_resource_limit() -> None:
    qm = QueryManager(max_concurrent=4, default_timeout_ms=0)
    stop, errors = threading.Event(), {}  # type: ignore[var-annotated]
    first, second = threading.Event(), threading.Event()
    t1 = _running(qm, "old", first, stop, errors)
    first.wait(5)
    time.sleep(0.02)
    t2 = _running(qm, "young", second, stop, errors)
    second.wait(5)
    guard = MemoryGuard(qm, budget_bytes=1)  # every sample is past it
    assert resident_bytes() > 64 * 2**20
    guard.sample(0)  # both seen when the process "held" nothing: both grew it since
    assert guard.sample(resident_bytes()) is True
    t1.join(5)
    assert "old" in errors and "young" not in errors
    err = errors["old"]
    assert err.status == 400 and err.context.get("legacyErrorCode") == "Resource limit exceeded"
    assert "server.memory_limit + server.memory_headroom" in err.message
    # one at a time: the next stop waits for the grace period of the first (it has ended: no wait)
    assert guard.sample(resident_bytes()) is True
    t2.join(5)
    assert "young" in errors
    stop.set()


def test_a_query_the_process_did_not_grow_under_is_not_blamed() -> None:
    qm = QueryManager(max_concurrent=4, default_timeout_ms=0)
    stop, errors, started = threading.Event(), {}, threading.Event()  # type: ignore[var-annotated]
    t = _running(qm, "q", started, stop, errors)
    started.wait(5)
    guard = MemoryGuard(qm, budget_bytes=1)
    rss = resident_bytes()
    guard.sample(rss)  # first seen at today's size
    assert guard.sample(rss) is False and not errors
    stop.set()
    t.join(5)


def test_no_budget_no_guard() -> None:
    guard = MemoryGuard(QueryManager(), budget_bytes=0)  # server.memory_headroom empty
    guard.start()
    assert guard._thread is None
