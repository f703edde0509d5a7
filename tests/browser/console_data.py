"""Data for the console's browser tests, loaded through the real task API.

``load_lambda_picture`` draws the Lambda picture honestly with two kinds of task-API loads: appends
(``appendToExisting``: ``numbered`` partitions with ``partitions = 0``, the real-time segment shape)
for three days, twice, so each day has two real-time partitions; then an overwrite of the first two
days (a newer version with a core set: the batch shape), which overshadows their real-time
partitions. The third day stays real-time. (The batch layer's own backfill makes the same picture.)
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")
PAGES = ("Main_Page", "Druid", "Kafka", "Spark")


def events(days: tuple[str, ...], *, added: int, hours: range = range(0, 24, 2)) -> list[dict[str, Any]]:
    return [{"ts": f"{d}T{h:02d}:15:00Z", "page": p, "added": added * (i + 1)}
            for d in days for h in hours for i, p in enumerate(PAGES)]


def task(ds: str, rows: list[dict[str, Any]], *, append: bool) -> dict[str, Any]:
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": ds,
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": ["page"]},
                "metricsSpec": [{"type": "count", "name": "count"},
                                {"type": "longSum", "name": "added", "fieldName": "added"}],
                "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "hour", "rollup": True},
            },
            "ioConfig": {"type": "index_parallel", "appendToExisting": append, "inputFormat": {"type": "json"},
                         "inputSource": {"type": "inline", "data": "\n".join(json.dumps(r) for r in rows)}},
            "tuningConfig": {"type": "index_parallel"},
        },
    }


def run_task(url: str, spec: dict[str, Any], timeout: float = 120, auth: tuple[str, str] | None = None) -> str:
    r = httpx.post(f"{url}/druid/indexer/v1/task", json=spec, timeout=30, auth=auth)
    assert r.status_code == 200, r.text
    tid = r.json()["task"]
    deadline = time.monotonic() + timeout
    while True:
        st = httpx.get(f"{url}/druid/indexer/v1/task/{tid}/status", timeout=30, auth=auth).json()["status"]
        if st["status"] != "RUNNING":
            assert st["status"] == "SUCCESS", st
            return tid
        assert time.monotonic() < deadline, f"task {tid} still running"
        time.sleep(0.1)


def sql(url: str, query: str) -> list[dict[str, Any]]:
    r = httpx.post(f"{url}/druid/v2/sql", json={"query": query}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def wait_served(url: str, ds: str, predicate: Any, timeout: float = 30) -> list[dict[str, Any]]:
    """Poll sys.segments for ``ds`` until ``predicate(rows)`` holds (the broker refreshes async)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = sql(url, f"SELECT segment_id, version, partition_num, is_overshadowed, is_active, num_rows "
                        f"FROM sys.segments WHERE datasource = '{ds}'")
        if predicate(rows):
            return rows
        assert time.monotonic() < deadline, rows
        time.sleep(0.2)


def load_lambda_picture(url: str, ds: str = "wiki") -> dict[str, Any]:
    run_task(url, task(ds, events(DAYS, added=1), append=True))
    run_task(url, task(ds, events(DAYS, added=10, hours=range(1, 24, 2)), append=True))
    run_task(url, task(ds, events(DAYS[:2], added=100), append=False))
    segs = httpx.get(f"{url}/druid/coordinator/v1/metadata/datasources/{ds}/segments?full", timeout=30).json()
    rt = [s for s in segs if s["shardSpec"].get("partitions") == 0]
    batch = [s for s in segs if s["shardSpec"].get("partitions", 0) > 0]
    assert len(rt) == 6 and len(batch) == 2, segs
    # the rows the console must show: batch truth for days 1-2, both real-time partitions for day 3
    expected = {d: sum(e["added"] for e in events((d,), added=100)) for d in DAYS[:2]}
    expected[DAYS[2]] = (sum(e["added"] for e in events((DAYS[2],), added=1))
                         + sum(e["added"] for e in events((DAYS[2],), added=10, hours=range(1, 24, 2))))
    wait_served(url, ds, lambda rows: len(rows) == 8 and sum(r["is_overshadowed"] for r in rows) == 4)
    return {"realtime": rt, "batch": batch, "added_by_day": expected}
