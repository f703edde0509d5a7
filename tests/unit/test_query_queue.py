"""Admission like Druid's query scheduler: a burst waits in a bounded priority queue instead of getting
429 at once; the low lane is capped; waits are bounded; queued queries can be cancelled."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from serving.broker.query_manager import QueryManager
from serving.errors import DruidError


def _hold(qm: QueryManager, qid: str, release: threading.Event, order: list[str], priority: int = 0,
          errors: dict[str, Any] | None = None) -> threading.Thread:
    def run() -> None:
        try:
            with qm.run(qid, 0, priority):
                order.append(qid)
                release.wait(10)
        except DruidError as e:
            if errors is not None:
                errors[qid] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _wait_for(cond: Any, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_burst_waits_and_runs_in_priority_order() -> None:
    qm = QueryManager(max_concurrent=1, default_timeout_ms=0, max_queued=10)
    order: list[str] = []
    gate = threading.Event()
    first = _hold(qm, "first", gate, order)
    _wait_for(lambda: order == ["first"])
    later = threading.Event()
    threads = [_hold(qm, "low", later, order, priority=-5)]
    _wait_for(lambda: len(qm._waiting) == 1)
    threads.append(_hold(qm, "normal", later, order, priority=0))
    _wait_for(lambda: len(qm._waiting) == 2)
    threads.append(_hold(qm, "high", later, order, priority=10))
    _wait_for(lambda: len(qm._waiting) == 3)
    later.set()
    gate.set()
    for t in [first, *threads]:
        t.join(10)
    assert order == ["first", "high", "normal", "low"]  # not arrival order


def test_queue_full_is_429_and_waits_are_bounded() -> None:
    qm = QueryManager(max_concurrent=1, default_timeout_ms=0, max_queued=1, queue_timeout_ms=300)
    gate = threading.Event()
    order: list[str] = []
    errors: dict[str, Any] = {}
    held = _hold(qm, "a", gate, order)
    _wait_for(lambda: order == ["a"])
    waiting = _hold(qm, "b", threading.Event(), order, errors=errors)
    _wait_for(lambda: len(qm._waiting) == 1)
    with pytest.raises(DruidError) as full, qm.run("c", 0):
        pass
    assert full.value.status == 429 and "max_queued_queries" in full.value.message
    waiting.join(5)
    assert errors["b"].status == 429 and "query_queue_timeout_ms" in errors["b"].message
    gate.set()
    held.join(5)
    assert qm._waiting == [] and qm.running() == []


def test_a_short_query_timeout_ends_the_wait_as_a_timeout() -> None:
    qm = QueryManager(max_concurrent=1, default_timeout_ms=0, queue_timeout_ms=60_000)
    gate = threading.Event()
    order: list[str] = []
    held = _hold(qm, "a", gate, order)
    _wait_for(lambda: order == ["a"])
    t0 = time.monotonic()
    with pytest.raises(DruidError) as e, qm.run("b", 200):
        pass
    assert e.value.status == 504 and time.monotonic() - t0 < 3
    gate.set()
    held.join(5)


def test_the_low_lane_cannot_take_every_slot() -> None:
    qm = QueryManager(max_concurrent=2, default_timeout_ms=0, low_priority_percent=50)
    gate = threading.Event()
    order: list[str] = []
    low1 = _hold(qm, "low1", gate, order, priority=-1)
    _wait_for(lambda: order == ["low1"])
    low2 = _hold(qm, "low2", gate, order, priority=-1)
    _wait_for(lambda: len(qm._waiting) == 1)  # the lane (1 of 2 slots) is full
    normal = _hold(qm, "normal", gate, order)
    _wait_for(lambda: "normal" in order)  # a normal query still gets the free slot at once
    assert "low2" not in order
    gate.set()
    for t in (low1, low2, normal):
        t.join(5)
    assert sorted(order) == ["low1", "low2", "normal"]


def test_a_queued_query_can_be_cancelled() -> None:
    qm = QueryManager(max_concurrent=1, default_timeout_ms=0)
    gate = threading.Event()
    order: list[str] = []
    errors: dict[str, Any] = {}
    held = _hold(qm, "a", gate, order)
    _wait_for(lambda: order == ["a"])
    queued = _hold(qm, "q", threading.Event(), order, errors=errors)
    _wait_for(lambda: len(qm._waiting) == 1)
    assert "q" in qm.running()  # known by id while it waits, so DELETE finds it
    assert qm.cancel("q")
    queued.join(5)
    assert errors["q"].category == "CANCELED" and "q" not in order
    gate.set()
    held.join(5)


def test_priority_must_be_an_integer() -> None:
    assert QueryManager.priority_of({"priority": "7"}) == 7 and QueryManager.priority_of(None) == 0
    with pytest.raises(DruidError):
        QueryManager.priority_of({"priority": "high"})


def test_an_enormous_timeout_runs_without_a_timer_thread_error() -> None:
    qm = QueryManager(max_concurrent=1, default_timeout_ms=0, max_queued=1)
    errors: list[BaseException] = []
    old_hook = threading.excepthook
    threading.excepthook = lambda args: errors.append(args.exc_value)
    try:
        with qm.run("huge", qm.timeout_of({"timeout": 10**20})) as rq:
            time.sleep(0.05)
            rq.check()
    finally:
        threading.excepthook = old_hook
    assert errors == []
