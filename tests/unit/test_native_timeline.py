"""The broker serves the timeline: overshadowing, clipping, real-time appends, atomic swaps, and the
query manager's limits."""

from __future__ import annotations

import threading
import time
from typing import Any

import pyarrow as pa
import pytest

from serving.broker.native import run_native_query
from serving.broker.queries.query_manager import QueryManager
from serving.errors import DruidError
from tests.fixtures.broker import WIKI_SCHEMA, wiki_table

TOTAL = {"queryType": "timeseries", "dataSource": "wiki", "intervals": ["2024-01-01/2024-01-05"],
         "granularity": "all", "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}]}


def total(env: Any) -> int:
    return run_native_query(env.service, TOTAL)[0]["result"]["added"]


def one_row(ts: str, added: int, page: str = "New") -> pa.Table:
    return pa.table({"ts": [ts], "page": [page], "user": ["zed"], "country": ["NZ"], "ns": [9],
                     "added": [added], "delta": [0.0]})


def test_overshadow_clip_and_realtime_appends(wiki: Any) -> None:
    svc = wiki.service
    assert total(wiki) == 56
    old_day1 = "wiki_2024-01-01T00:00:00.000Z_2024-01-02T00:00:00.000Z_2024-02-01T00:00:00.000Z"
    assert svc.cache.get(old_day1) is not None
    # v2 replaces day 1
    wiki.index(one_row("2024-01-01T12:00:00Z", 100), WIKI_SCHEMA, version="2024-03-01T00:00:00.000Z")
    svc.refresh()
    assert total(wiki) == 100 + 33
    assert svc.cache.get(old_day1) is None  # dropped once overshadowed
    states = {s["segment_id"]: s for s in svc.segment_states()}
    assert states[old_day1]["is_overshadowed"] == 1 and states[old_day1]["is_available"] == 0
    # an HOUR segment of a higher version hides day 2's 00h only: day 2 is served clipped around it
    hourly = {**WIKI_SCHEMA, "granularitySpec": {**WIKI_SCHEMA["granularitySpec"], "segmentGranularity": "hour"}}
    wiki.index(one_row("2024-01-02T00:30:00Z", 1000), hourly, version="2024-04-01T00:00:00.000Z")
    svc.refresh()
    assert total(wiki) == 100 + 1000 + (33 - 20)
    # real-time segments (partitions = 0) are appended and visible at once, any subset is complete
    rt_version = "2024-01-03T00:00:00.000Z"
    wiki.index(one_row("2024-01-03T01:00:00Z", 5), WIKI_SCHEMA, version=rt_version, shard="append")
    from radstack.time.intervals import Interval

    day3 = Interval.parse("2024-01-03/2024-01-04")
    wiki.index(one_row("2024-01-03T02:00:00Z", 6), WIKI_SCHEMA, version=rt_version, shard="append",
               partition_offset={day3: 1})
    svc.refresh()
    assert total(wiki) == 100 + 1000 + 13 + 5 + 6
    rt = [s for s in svc.segment_states() if s["version"] == rt_version]
    assert sorted(s["partition_num"] for s in rt) == [0, 1] and all(s["is_realtime"] for s in rt)
    scan = run_native_query(svc, {"queryType": "scan", "dataSource": "wiki", "intervals": ["2024-01-02/2024-01-03"],
                                  "columns": ["added"], "order": "ascending"})
    assert [e["added"] for b in scan for e in b["events"]] == [1000, 3, 8, 2]


def test_incomplete_core_set_is_not_visible(wiki: Any) -> None:
    from dataclasses import replace

    from radstack.storage.segments import ShardSpec

    segs = wiki.index(one_row("2024-01-01T12:00:00Z", 100), WIKI_SCHEMA, version="2024-03-01T00:00:00.000Z",
                      publish=False)
    # claim the set has 2 partitions but publish only partition 0: v1 stays visible
    wiki.publish([replace(segs[0], shard_spec=ShardSpec("numbered", 0, 2))])
    wiki.service.refresh()
    assert total(wiki) == 56


def test_queries_never_see_two_versions_while_publishing(wiki: Any) -> None:
    svc = wiki.service
    svc.poll_seconds = 0.02
    svc.start()
    base = wiki_table()
    tenfold = base.set_column(base.schema.get_field_index("added"), "added",
                              pa.array([a * 10 for a in base.column("added").to_pylist()]))
    errors: list[Any] = []
    answers: list[int] = []
    stop = threading.Event()

    def query_loop() -> None:
        while not stop.is_set():
            try:
                answers.append(total(wiki))
            except Exception as e:  # noqa: BLE001
                errors.append(e)

    threads = [threading.Thread(target=query_loop) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for i in range(1, 9):
            table = tenfold if i % 2 else base
            wiki.index(table, WIKI_SCHEMA, version=f"2024-03-01T00:00:{i:02d}.000Z")
            time.sleep(0.05)
    finally:
        time.sleep(0.2)
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors[:3]
    assert set(answers) <= {56, 560}, sorted(set(answers))
    assert {56, 560} <= set(answers)  # both versions were seen
    assert total(wiki) == 56  # the last version (i = 8) is the plain one


def test_query_manager_capacity_and_cancel() -> None:
    import duckdb

    qm = QueryManager(max_concurrent=1, default_timeout_ms=0, max_queued=0)  # no queue: 429 at once
    with qm.run("a"), pytest.raises(DruidError) as e, qm.run("b"):
        pass
    assert e.value.status == 429
    db = duckdb.connect()
    result: dict[str, Any] = {}

    def long_query() -> None:
        cur = db.cursor()
        try:
            with qm.run("long", 0) as rq:
                rq.attach(cur)
                rq.execute(cur, "SELECT count(*) FROM range(100000000000) a")
        except DruidError as err:
            result["err"] = err

    t = threading.Thread(target=long_query)
    t.start()
    deadline = time.time() + 5
    while "long" not in qm.running() and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    assert qm.cancel("long") is True
    t.join(10)
    assert not t.is_alive()
    assert result["err"].category == "CANCELED"
    assert qm.cancel("long") is False  # finished: unknown id


def test_timeout_interrupts_a_running_statement() -> None:
    import duckdb

    qm = QueryManager(max_concurrent=4, default_timeout_ms=0)
    cur = duckdb.connect().cursor()
    t0 = time.monotonic()
    with pytest.raises(DruidError) as e, qm.run("t", 200) as rq:
        rq.attach(cur)
        rq.execute(cur, "SELECT count(*) FROM range(100000000000) a")
    assert e.value.status == 504
    assert time.monotonic() - t0 < 5
