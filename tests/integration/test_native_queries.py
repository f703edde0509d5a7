"""The native API over HTTP on a live server (uvicorn on a free port), with pydruid's client."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(wiki: Any) -> Iterator[str]:
    import uvicorn
    from fastapi import FastAPI

    from serving.broker.api_native import router
    from serving.errors import install_error_handlers

    app = FastAPI()
    install_error_handlers(app)
    app.state.ctx = SimpleNamespace(broker=wiki.service, settings=wiki.settings)
    app.include_router(router)
    port = _free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False)
    srv = uvicorn.Server(config)
    t = threading.Thread(target=srv.run, daemon=True)
    t.start()
    deadline = time.time() + 20
    while not srv.started and time.time() < deadline:
        time.sleep(0.02)
    assert srv.started
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        t.join(10)


def test_pydruid_client(server: str) -> None:
    from pydruid.client import PyDruid
    from pydruid.utils.aggregators import count, doublesum, longsum
    from pydruid.utils.filters import Dimension
    from pydruid.utils.postaggregator import Field

    client = PyDruid(server, "druid/v2")
    ts = client.timeseries(datasource="wiki", granularity="day", intervals="2024-01-01/2024-01-03",
                           aggregations={"added": longsum("added"), "rows": count("count")},
                           post_aggregations={"per_row": Field("added") / Field("rows")})
    assert ts.result == [
        {"timestamp": "2024-01-01T00:00:00.000Z", "result": {"added": 23, "rows": 3, "per_row": 23 / 3}},
        {"timestamp": "2024-01-02T00:00:00.000Z", "result": {"added": 33, "rows": 4, "per_row": 33 / 4}},
    ]
    top = client.topn(datasource="wiki", granularity="all", intervals="2024-01-01/2024-01-03",
                      aggregations={"added": longsum("added")}, dimension="user", metric="added", threshold=2)
    assert top.result[0]["result"] == [{"user": "bob", "added": 27}, {"user": "alice", "added": 20}]
    gb = client.groupby(datasource="wiki", granularity="all", intervals="2024-01-01/2024-01-03",
                        dimensions=["page"], filter=Dimension("country") == "US",
                        aggregations={"delta": doublesum("delta")})
    assert [(r["event"]["page"], r["event"]["delta"]) for r in gb.result] == [("Help", -1.0), ("Main", 2.0)]


def test_http_endpoints_and_errors(server: str) -> None:
    q = {"queryType": "timeBoundary", "dataSource": "wiki", "context": {"queryId": "tb-1"}}
    r = httpx.post(f"{server}/druid/v2?pretty", json=q)
    assert r.status_code == 200 and r.headers["X-Druid-Query-Id"] == "tb-1"
    assert "\n  " in r.text
    assert r.json()[0]["result"]["maxTime"] == "2024-01-02T05:00:00.000Z"
    r = httpx.post(f"{server}/druid/v2/", content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"] == "druidException"
    r = httpx.post(f"{server}/druid/v2", json={"queryType": "timeseries", "dataSource": "wiki",
                                               "intervals": ["2024-01-01/2024-01-03"], "granularity": "fortnight"})
    assert r.status_code == 400 and r.json()["category"] == "INVALID_INPUT"
    r = httpx.post(f"{server}/druid/v2", json={"queryType": "groupBy", "dataSource": "wiki",
                                               "intervals": ["2024-01-01/2024-01-03"], "granularity": "all",
                                               "dimensions": ["page", "user"], "context": {"timeout": 1},
                                               "aggregations": [{"type": "count", "name": "c"}]})
    assert r.status_code == 504 and r.json()["category"] == "TIMEOUT"
    r = httpx.post(f"{server}/druid/v2", json={"queryType": "timeseries", "dataSource": "nope",
                                               "intervals": ["2024-01-01/2024-01-03"]})
    assert r.status_code == 200 and r.json() == []
    assert httpx.delete(f"{server}/druid/v2/not-running").status_code == 404
    assert httpx.get(f"{server}/druid/v2/datasources").json() == ["wiki"]
    r = httpx.get(f"{server}/druid/v2/datasources/wiki", params={"interval": "2024-01-01_2024-01-03"})
    assert r.json() == {"dimensions": ["country", "ns", "page", "user"], "metrics": ["added", "count", "delta"]}
    # Druid's default interval is the last week before now: this 2024 data is outside it
    assert httpx.get(f"{server}/druid/v2/datasources/wiki").json() == {"dimensions": [], "metrics": []}


def test_cancel_over_http(server: str, wiki: Any) -> None:
    import duckdb

    qm = wiki.service.queries
    done: dict[str, Any] = {}

    def slow() -> None:
        cur = duckdb.connect().cursor()
        try:
            with qm.run("slow-1", 0) as rq:
                rq.attach(cur)
                rq.execute(cur, "SELECT count(*) FROM range(100000000000) a")
        except Exception as e:  # noqa: BLE001
            done["err"] = e

    t = threading.Thread(target=slow)
    t.start()
    deadline = time.time() + 5
    while "slow-1" not in qm.running() and time.time() < deadline:
        time.sleep(0.01)
    assert httpx.delete(f"{server}/druid/v2/slow-1").status_code == 202
    t.join(10)
    assert done["err"].category == "CANCELED"
