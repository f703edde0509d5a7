"""The coordinator's lifecycle duties in the real server (uvicorn, real HTTP, SQLite + local deep
storage): retention rules posted through the rules API drop segments and the broker stops serving
them; the compaction config API and the coordinator's compaction duty (and Druid's ``compact`` task)
roll intervals up with every total kept and no double counting; the ``kill`` task deletes unused
segments only; the automatic kill stays off by default."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest

from radstack.time.intervals import format_instant, parse_instant

pytestmark = pytest.mark.slow

MINUTE, HOUR, DAY = 60_000, 3_600_000, 86_400_000
METRICS = [{"type": "count", "name": "count"}, {"type": "longSum", "name": "bytes", "fieldName": "bytes"},
           {"type": "doubleMax", "name": "peak", "fieldName": "peak"}]
SCHEMA = {"dataSource": "net", "timestampSpec": {"column": "ts", "format": "millis"},
          "dimensionsSpec": {"dimensions": ["src", "dst"]}, "metricsSpec": METRICS,
          "granularitySpec": {"segmentGranularity": "HOUR", "queryGranularity": "MINUTE", "rollup": True}}


def ingest(srv: Any, start: str, days: int, step: int = 5 * MINUTE) -> pa.Table:
    """Events every ``step`` for 4 (src, dst) pairs, indexed like real-time segments (one version
    per hour = its start, appended partitions)."""
    from radstack.spec import parse_data_schema
    from radstack.storage.indexer import index_partition
    from radstack.storage.publish import publish

    t0 = parse_instant(start)
    rows: dict[str, list[Any]] = {"ts": [], "src": [], "dst": [], "bytes": [], "peak": []}
    i = 0
    for k in range(days * DAY // step):
        for src, dst in (("a", "x"), ("a", "y"), ("b", "x"), ("b", "y")):
            i += 1
            rows["ts"].append(t0 + k * step + 1000)
            rows["src"].append(src)
            rows["dst"].append(dst)
            rows["bytes"].append(i % 1500)
            rows["peak"].append((i % 77) * 1.5)
    table = pa.table(rows)
    schema = parse_data_schema(SCHEMA)
    segs = []
    for h in range(days * 24):
        lo, hi = t0 + h * HOUR, t0 + (h + 1) * HOUR
        part = table.filter(pa.compute.and_(pa.compute.greater_equal(table["ts"], lo), pa.compute.less(table["ts"], hi)))
        segs += index_partition(part, schema, version=format_instant(lo), deep_storage=srv.ctx.deep_storage,
                                shard="append").segments
    publish(srv.ctx.metadata, srv.ctx.deep_storage, segs)
    return table


def sql(url: str, query: str) -> list[dict[str, Any]]:
    r = httpx.post(f"{url}/druid/v2/sql", json={"query": query}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def totals(url: str) -> dict[str, Any]:
    return sql(url, 'SELECT COUNT(*) AS "rows", SUM("count") AS c, SUM(bytes) AS b, MAX(peak) AS p FROM net')[0]


def try_totals(url: str) -> dict[str, Any]:
    """Totals, or {} while the broker has not loaded the datasource yet."""
    r = httpx.post(f"{url}/druid/v2/sql", json={"query": 'SELECT SUM("count") AS c FROM net'}, timeout=60)
    return totals(url) if r.status_code == 200 else {}


def wait_for(fn: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(0.2)


def wait_task(url: str, task_id: str) -> dict[str, Any]:
    def done() -> Any:
        st = httpx.get(f"{url}/druid/indexer/v1/task/{task_id}/status").json()["status"]
        return st if st["status"] != "RUNNING" else None

    st = wait_for(done, 120)
    assert st, f"task {task_id} did not finish"
    return st


def test_retention_rules_drop_and_the_broker_stops_serving(radstack_home: Path) -> None:
    from tests.fixtures.server import running_server

    with running_server(radstack_home, {"coordinator": {"period_seconds": 0.2}}) as srv:
        url = srv.url
        ingest(srv, "2024-01-01T00:00:00Z", 3, step=30 * MINUTE)
        assert wait_for(lambda: try_totals(url).get("c") == 3 * 48 * 4)
        # keep only 2024-01-03 onwards; the default rule (loadForever) would keep everything
        r = httpx.post(f"{url}/druid/coordinator/v1/rules/net",
                       json=[{"type": "loadByInterval", "interval": "2024-01-03/2030-01-01"}, {"type": "dropForever"}])
        assert r.status_code == 200
        assert wait_for(lambda: totals(url)["c"] == 48 * 4)
        used = srv.ctx.metadata.segments("net", used=True)
        assert used and all(s.interval.start >= parse_instant("2024-01-03T00:00:00Z") for s in used)
        assert len(srv.ctx.metadata.segments("net", used=False)) == 48
        # automatic kill is off by default: the unused segments and their files stay
        time.sleep(1.0)
        assert len(srv.ctx.metadata.segments("net", used=False)) == 48
        assert all(srv.ctx.deep_storage.exists(srv.ctx.deep_storage.key_for_load_spec(s.load_spec))
                   for s in srv.ctx.metadata.segments("net", used=False))


def test_compaction_config_api_and_duty_and_kill_task(radstack_home: Path) -> None:
    from tests.fixtures.server import running_server

    overrides = {"coordinator": {"period_seconds": 3600, "compaction": {"period_seconds": 0}}}
    with running_server(radstack_home, overrides) as srv:
        url = srv.url
        coord = f"{url}/druid/coordinator/v1"
        table = ingest(srv, "2024-01-01T00:00:00Z", 2)
        expected = {"c": table.num_rows, "b": sum(table["bytes"].to_pylist()), "p": max(table["peak"].to_pylist())}
        before = wait_for(lambda: (t := try_totals(url)).get("c") == expected["c"] and t)
        assert before["rows"] == 2 * 24 * 12 * 4

        # the config API, in Druid's shape
        assert httpx.get(f"{coord}/config/compaction").json()["compactionConfigs"] == []
        assert httpx.get(f"{coord}/config/compaction/net").status_code == 404
        bad = httpx.post(f"{coord}/config/compaction", json={"dataSource": "net", "tiers": [{"queryGranularity": "HOUR"}]})
        assert bad.status_code == 400
        cfg = {"dataSource": "net", "skipOffsetFromLatest": "PT0S", "metricsSpec": METRICS,
               "tiers": [{"olderThan": "P1D", "queryGranularity": "HOUR", "segmentGranularity": "DAY"}]}
        assert httpx.post(f"{coord}/config/compaction", json=cfg).status_code == 200
        got = httpx.get(f"{coord}/config/compaction/net").json()
        assert got["dataSource"] == "net" and got["tiers"] == cfg["tiers"]

        # one coordinator pass compacts both days (they are long past)
        report = srv.ctx.coordinator.run_once()
        assert not report.errors and len(report["compaction"]) == 2
        srv.ctx.broker.refresh(force=True)
        after = totals(url)
        assert after["rows"] == 2 * 24 * 4  # 12 five-minute rows per hour and pair → 1
        assert (after["c"], after["b"]) == (expected["c"], expected["b"]) and after["p"] == pytest.approx(expected["p"])
        seg_rows = sql(url, "SELECT COUNT(*) AS n, SUM(is_overshadowed) AS o FROM sys.segments WHERE datasource='net'")[0]
        assert seg_rows["n"] == 2 * 24 + 2 and seg_rows["o"] == 2 * 24

        # a second pass marks the detailed segments unused (overshadowed) and compacts nothing more
        report = srv.ctx.coordinator.run_once()
        assert report["compaction"] == [] and len(report["mark_overshadowed_unused"]) == 48
        unused = srv.ctx.metadata.segments("net", used=False)
        used = srv.ctx.metadata.segments("net", used=True)
        assert len(unused) == 48 and len(used) == 2

        # kill: a dry run first, then for real; the compacted (used) segments survive with their files
        task = {"type": "kill", "dataSource": "net", "interval": "2024-01-01/2024-01-03", "dryRun": True}
        tid = httpx.post(f"{url}/druid/indexer/v1/task", json=task).json()["task"]
        assert wait_task(url, tid)["status"] == "SUCCESS"
        assert len(srv.ctx.metadata.segments("net", used=False)) == 48
        tid = httpx.post(f"{url}/druid/indexer/v1/task", json={**task, "dryRun": False}).json()["task"]
        assert wait_task(url, tid)["status"] == "SUCCESS"
        assert srv.ctx.metadata.segments("net", used=False) == []
        deep = srv.ctx.deep_storage
        assert all(not deep.list(deep.key_for_load_spec(s.load_spec).rsplit("/", 1)[0]) for s in unused)
        assert [s.identifier for s in srv.ctx.metadata.segments("net", used=True)] == [s.identifier for s in used]
        assert all(deep.exists(deep.key_for_load_spec(s.load_spec)) for s in used)
        final = totals(url)
        assert (final["c"], final["b"]) == (expected["c"], expected["b"])
        assert httpx.post(f"{url}/druid/indexer/v1/task", json={"type": "kill", "dataSource": "net"}).status_code == 400

        assert httpx.delete(f"{coord}/config/compaction/net").status_code == 200
        assert httpx.get(f"{coord}/config/compaction").json()["compactionConfigs"] == []


def test_compact_task_on_the_task_api(radstack_home: Path) -> None:
    from tests.fixtures.server import running_server

    with running_server(radstack_home, {"coordinator": {"period_seconds": 3600}}) as srv:
        url = srv.url
        table = ingest(srv, "2024-01-01T00:00:00Z", 1)
        assert wait_for(lambda: try_totals(url).get("c") == table.num_rows)
        task = {"type": "compact", "dataSource": "net",
                "ioConfig": {"type": "compact", "inputSpec": {"type": "interval", "interval": "2024-01-01/2024-01-02"}},
                "granularitySpec": {"segmentGranularity": "DAY", "queryGranularity": "DAY"}, "metricsSpec": METRICS}
        tid = httpx.post(f"{url}/druid/indexer/v1/task", json=task).json()["task"]
        st = wait_task(url, tid)
        assert st["status"] == "SUCCESS", st
        srv.ctx.broker.refresh(force=True)
        t = totals(url)
        assert t["rows"] == 4 and t["c"] == table.num_rows and t["b"] == sum(table["bytes"].to_pylist())
        [seg] = [s for s in srv.ctx.metadata.segments("net", used=True) if s.interval.duration_ms == DAY]
        assert seg.last_compaction_state is not None
        assert seg.last_compaction_state["granularitySpec"]["queryGranularity"] == "DAY"
        bad = httpx.post(f"{url}/druid/indexer/v1/task", json={"type": "compact", "dataSource": "net"})
        assert bad.status_code == 400
