"""Admission like Druid's query scheduler: a burst waits in a bounded priority queue instead of getting
429 at once; the low lane is capped; waits are bounded; queued queries can be cancelled."""

from __future__ import annotations

import threading
import time
from typing import Any

import duckdb
import pytest

from serving.broker.queries.query_manager import QueryManager
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


def test_a_timeout_past_the_servers_maximum_is_400_and_zero_is_the_maximum() -> None:
    qm = QueryManager(max_concurrent=1, default_timeout_ms=300_000, max_timeout_ms=600_000)
    assert qm.timeout_of({"timeout": 0}) == 600_000
    assert qm.timeout_of({"timeout": 1000}) == 1000
    assert qm.timeout_of({}) == 300_000
    for huge in (600_001, 1e30):
        with pytest.raises(DruidError) as ei:
            qm.timeout_of({"timeout": huge})
        assert ei.value.status == 400 and "more than enforced limit of 600000" in ei.value.message


def _hold_as(qm: QueryManager, qid: str, user: str, release: threading.Event, order: list[str],
             errors: dict[str, Any]) -> threading.Thread:
    def run() -> None:
        try:
            with qm.run(qid, 0, 0, owner=user):
                order.append(qid)
                release.wait(10)
        except DruidError as e:
            errors[qid] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_one_user_cannot_hold_every_slot() -> None:
    qm = QueryManager(max_concurrent=4, default_timeout_ms=0, max_queued=16, max_per_user=2, queue_timeout_ms=10_000)
    release, order, errors = threading.Event(), [], {}  # type: ignore[var-annotated]
    mallory = [_hold_as(qm, f"m{i}", "mallory", release, order, errors) for i in range(6)]
    _wait_for(lambda: len(order) == 2 and len(qm.running()) == 6)  # two of mallory's run, four wait
    time.sleep(0.1)
    assert len(order) == 2
    with qm.run("v", 0, 0, owner="victim"):  # a free slot is the victim's at once
        assert "v" in qm.running()
    # half of the queue is one user's share: the next one is refused, naming the setting
    extra = [_hold_as(qm, f"x{i}", "mallory", release, order, errors) for i in range(6)]
    _wait_for(lambda: any(k.startswith("x") for k in errors))
    refused = next(e for k, e in errors.items() if k.startswith("x"))
    assert refused.status == 429 and "server.max_queries_per_user" in refused.message
    release.set()
    for t in mallory + extra:
        t.join(10)
    assert len([q for q in order if q.startswith("m")]) == 6


def test_a_user_at_its_limit_times_out_naming_the_setting() -> None:
    qm = QueryManager(max_concurrent=4, default_timeout_ms=0, max_per_user=1, queue_timeout_ms=200)
    release, order, errors = threading.Event(), [], {}  # type: ignore[var-annotated]
    first = _hold_as(qm, "a", "ana", release, order, errors)
    _wait_for(lambda: order == ["a"])
    with pytest.raises(DruidError) as ei, qm.run("b", 0, 0, owner="ana"):
        pass
    assert ei.value.status == 429 and "server.max_queries_per_user" in ei.value.message
    release.set()
    first.join(5)


def test_a_query_whose_client_left_before_it_arrived_is_refused_when_it_does() -> None:
    qm = QueryManager(max_concurrent=1, default_timeout_ms=0)
    qm.abandon("late")  # the client went away while the query waited for a worker thread
    with pytest.raises(DruidError) as ei, qm.run("late", 0):
        pass
    assert "client went away" in ei.value.message and qm.running() == []
    with qm.run("late", 0):  # remembered once: the same id later is a new query
        assert qm.running() == ["late"]


def test_an_interrupt_that_lands_before_duckdb_starts_the_statement_is_not_lost() -> None:
    """DuckDB clears a connection's interrupt flag when a statement begins: a cancel that arrives between
    the query's last check and that moment must still stop the statement (it is repeated until the query
    leaves the manager)."""
    qm = QueryManager(max_concurrent=2, default_timeout_ms=0)
    con = duckdb.connect()
    slow = "SELECT SUM(HASH(a.range + b.range)) FROM range(100000) a, range(100000) b"  # ~minutes unstopped
    with pytest.raises(DruidError, match="cancelled"), qm.run("late-cancel", 0) as rq:
        rq.attach(con)
        assert qm.cancel("late-cancel")
        started = time.monotonic()
        with pytest.raises(duckdb.InterruptException):
            con.execute(slow).fetchall()  # the window: past rq.check(), the statement not yet begun
        assert time.monotonic() - started < 2.0
    assert rq.done.is_set()


class _PoolFullOnce:
    """A cursor whose first ``full`` statements find DuckDB's shared pool full (held by other queries)."""

    def __init__(self, full: int = 1) -> None:
        self.calls = 0
        self.full = full

    def execute(self, sql: str, *params: Any) -> None:
        self.calls += 1
        if self.calls <= self.full:
            raise duckdb.OutOfMemoryException("Out of Memory Error: could not allocate block")

    def fetchall(self) -> list[tuple[Any, ...]]:
        return [(1,)]

    def interrupt(self) -> None:
        pass


def test_a_query_that_finds_the_pool_full_waits_for_the_others_and_tries_once_more() -> None:
    qm = QueryManager(max_concurrent=4, default_timeout_ms=0)
    release, order = threading.Event(), []  # type: ignore[var-annotated]
    holder = _hold(qm, "big", release, order)
    _wait_for(lambda: order == ["big"])
    with qm.run("small", 0) as rq:
        threading.Timer(0.3, release.set).start()
        cursor = _PoolFullOnce()
        started = time.monotonic()
        assert rq.execute(cursor, "SELECT 1") == [(1,)]  # type: ignore[arg-type]
        assert cursor.calls == 2 and time.monotonic() - started >= 0.25  # it waited for "big" to leave
    holder.join(5)


def test_under_a_stream_of_big_queries_a_small_one_tries_again_after_each_until_its_budget(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A sustained attack: each time the big queries holding the pool leave, new ones hold it again. The
    small query tries again after each wave (it used to give up after one retry), and gives up — with
    DuckDB's error — once its waits took OOM_WAIT_SECONDS in all."""
    qm = QueryManager(max_concurrent=8, default_timeout_ms=0)
    releases = [threading.Event() for _ in range(3)]
    holders: list[threading.Thread] = []
    order: list[str] = []
    holders.append(_hold(qm, "big0", releases[0], order))
    _wait_for(lambda: order == ["big0"])

    def waves() -> None:  # every 0.15 s the next big query takes the pool, then the last one leaves it
        for i in range(1, 3):
            time.sleep(0.15)
            holders.append(_hold(qm, f"big{i}", releases[i], order))
            _wait_for(lambda i=i: len(order) == i + 1)
            releases[i - 1].set()
        time.sleep(0.15)
        releases[-1].set()

    class _FullWhileBigRun(_PoolFullOnce):
        def execute(self, sql: str, *params: Any) -> None:
            self.calls += 1
            if not releases[-1].is_set():
                raise duckdb.OutOfMemoryException("Out of Memory Error: could not allocate block")

    with qm.run("small", 0) as rq:
        threading.Thread(target=waves, daemon=True).start()
        cursor = _FullWhileBigRun()
        assert rq.execute(cursor, "SELECT 1") == [(1,)]  # type: ignore[arg-type]
        assert cursor.calls >= 3 and rq.memory_waited_s < 5  # a try after each wave
    for t in holders:
        t.join(5)
    # a budget spent: DuckDB's error, not a wait forever
    monkeypatch.setattr("serving.broker.queries.query_manager.OOM_WAIT_SECONDS", 0.2)
    release, order = threading.Event(), []
    holder = _hold(qm, "hog", release, order)
    _wait_for(lambda: order == ["hog"])
    with qm.run("starved", 0) as rq:
        cursor = _PoolFullOnce(full=100)
        started = time.monotonic()
        with pytest.raises(duckdb.OutOfMemoryException):
            rq.execute(cursor, "SELECT 1")  # type: ignore[arg-type]
        assert 0.15 <= time.monotonic() - started < 2 and cursor.calls >= 2
    release.set()
    holder.join(5)


def test_a_query_alone_that_runs_out_of_memory_fails_at_once() -> None:
    qm = QueryManager(max_concurrent=4, default_timeout_ms=0)
    with qm.run("alone", 0) as rq:
        cursor = _PoolFullOnce()
        with pytest.raises(duckdb.OutOfMemoryException):
            rq.execute(cursor, "SELECT 1")  # type: ignore[arg-type]
        assert cursor.calls == 1


def test_a_query_id_names_one_running_query() -> None:
    """#50: a second query under a running query's id (another user's, say) is a 409, so a cancel by id
    reaches only the query its owner started."""
    qm = QueryManager(max_concurrent=4, default_timeout_ms=0)
    with qm.run("mine", 0, owner="ana"):
        with pytest.raises(DruidError) as e, qm.run("mine", 0, owner="bob"):
            pass
        assert e.value.status == 409 and "already running" in e.value.message
    with qm.run("mine", 0, owner="bob"):  # free again once it ended
        pass


def test_the_query_trying_longest_fails_at_once_while_the_younger_one_waits_for_it() -> None:
    """The sql-string-agg-size attack's victim error: a small query that found the pool full waited for the
    big one to leave; the big one, finding the pool full too, saw only a waiting query and tried again —
    again and again, while the small one waited out its whole budget. The big one (at it longer) now fails
    at its first full pool, and the small one tries again as soon as it has left."""
    qm = QueryManager(max_concurrent=4, default_timeout_ms=0)
    small_waits = threading.Event()
    big_cursor = _PoolFullOnce(full=10_000)
    big_error: list[BaseException] = []
    big_took: list[float] = []

    def big() -> None:
        with qm.run("big", 0) as rq:
            small_waits.wait(5)  # the small one is already waiting for it when its pool runs out
            time.sleep(0.05)
            started = time.monotonic()
            try:
                rq.execute(big_cursor, "SELECT big")  # type: ignore[arg-type]
            except duckdb.OutOfMemoryException as e:
                big_error.append(e)
            big_took.append(time.monotonic() - started)

    hog = threading.Thread(target=big, daemon=True)
    hog.start()
    _wait_for(lambda: qm.running() == ["big"])
    with qm.run("small", 0) as rq:
        cursor = _PoolFullOnce(full=1)
        real_wait = rq.wait_for_memory

        def waiting() -> bool:
            small_waits.set()
            return real_wait()

        rq.wait_for_memory = waiting
        started = time.monotonic()
        assert rq.execute(cursor, "SELECT 1") == [(1,)]  # type: ignore[arg-type]
        assert time.monotonic() - started < 1.0 and cursor.calls == 2
    hog.join(5)
    assert big_error and big_cursor.calls == 1 and big_took[0] < 0.5


def test_a_query_whose_pool_ran_out_just_after_the_older_one_left_tries_again_at_once() -> None:
    """The attack's remaining victim error: the big query failed and left a moment before the small one
    (younger) found the pool full — nothing left to wait for, yet the pool it found full was the big one's."""
    qm = QueryManager(max_concurrent=4, default_timeout_ms=0)
    release, order = threading.Event(), []  # type: ignore[var-annotated]
    holder = _hold(qm, "big", release, order)
    _wait_for(lambda: order == ["big"])
    with qm.run("small", 0) as rq:
        release.set()
        holder.join(5)
        assert qm.running() == ["small"]
        cursor = _PoolFullOnce(full=1)
        assert rq.execute(cursor, "SELECT 1") == [(1,)]  # type: ignore[arg-type]
        assert cursor.calls == 2
        # a query younger than it that left does not count: alone again, it is too big
        again = _PoolFullOnce(full=2)
        with pytest.raises(duckdb.OutOfMemoryException):
            rq.execute(again, "SELECT 1")  # type: ignore[arg-type]
        assert again.calls == 1
