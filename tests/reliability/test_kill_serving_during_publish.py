"""kill -9 of the serving process while an overwrite task publishes a new version over 30 day
segments: after a restart the datasource answers with the whole old version or the whole new one,
never a mix, and no half-written segment is visible."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.reliability.conftest import REPORT, SEED
from tests.reliability.serving_process import ServingProcess

pytestmark = [pytest.mark.slow, pytest.mark.reliability, pytest.mark.alone]

DAYS = 30
ROWS_PER_DAY = 400


def _task(k: int) -> dict[str, Any]:
    rows = [json.dumps({"ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1_735_689_600 + d * 86_400 + i)),
                        "page": f"p{i % 13}", "added": k})
            for d in range(DAYS) for i in range(ROWS_PER_DAY)]
    return {"type": "index_parallel", "spec": {
        "dataSchema": {"dataSource": "swap", "timestampSpec": {"column": "ts", "format": "iso"},
                       "dimensionsSpec": {"dimensions": ["page"]},
                       "metricsSpec": [{"type": "count", "name": "count"},
                                       {"type": "longSum", "name": "added", "fieldName": "added"}],
                       "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none", "rollup": False}},
        "ioConfig": {"type": "index_parallel", "inputSource": {"type": "inline", "data": "\n".join(rows)},
                     "inputFormat": {"type": "json"}, "appendToExisting": False}}}


class Server(ServingProcess):
    def totals(self) -> tuple[int, int]:
        deadline = time.monotonic() + 30
        while True:
            r = httpx.post(f"{self.url}/druid/v2/sql", timeout=30, json={
                "query": "SELECT COUNT(*) AS n, SUM(added) AS s, COUNT(DISTINCT TIME_FLOOR(__time, 'P1D')) AS d FROM swap"})
            if r.status_code == 200 and r.json() and r.json()[0]["n"]:
                row = r.json()[0]
                return int(row["n"]), int(row["s"])
            assert time.monotonic() < deadline, r.text
            time.sleep(0.3)


def _run_task(srv: Server, k: int) -> str:
    r = httpx.post(f"{srv.url}/druid/indexer/v1/task", json=_task(k), timeout=60)
    assert r.status_code == 200, r.text
    return str(r.json()["task"])


def test_killed_during_publish_shows_all_or_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    srv = Server(home)
    srv.start()
    tid = _run_task(srv, 1)
    deadline = time.monotonic() + 120
    while httpx.get(f"{srv.url}/druid/indexer/v1/task/{tid}/status").json()["status"]["status"] == "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    n_rows = DAYS * ROWS_PER_DAY
    assert srv.totals() == (n_rows, n_rows)
    rnd = random.Random(SEED)
    outcomes: list[bool] = []  # True: the new version was visible after the restart
    current = 1
    for k in range(2, 8):
        _run_task(srv, k)
        time.sleep(rnd.uniform(0.05, 2.5))  # somewhere while it reads, indexes or publishes
        srv.kill9()
        srv.start()
        n, s = srv.totals()
        assert n == n_rows, "a day is missing or doubled: a mix of versions"
        assert s in (current * n_rows, k * n_rows), (s, current, k)  # all old or all new
        outcomes.append(s == k * n_rows)
        current = s // n_rows
    srv.kill9()
    REPORT["serving kill -9 during publish"] = {
        "kills": len(outcomes), "new_version_whole": sum(outcomes), "old_version_whole": len(outcomes) - sum(outcomes),
        "mixed": 0}
