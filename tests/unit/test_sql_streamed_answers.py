"""A SQL answer larger than one batch is streamed (chunked, no Content-Length) and arrives whole; a
streamed answer holds its query's slot until the last chunk is taken (serving/broker/connection.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import httpx

from tests.fixtures.server import running_server

ROWS = 20_000  # five batches of 4,096


def test_a_streamed_answer_arrives_whole_and_frees_its_slot() -> None:
    values = ",".join(str(i) for i in range(ROWS))
    with tempfile.TemporaryDirectory() as home, running_server(Path(home)) as srv:
        r = httpx.post(srv.url + "/druid/v2/sql", json={
            "query": f"SELECT x FROM UNNEST(ARRAY[{values}]) AS u(x)", "resultFormat": "array", "header": True})
        assert r.status_code == 200
        assert r.headers.get("transfer-encoding") == "chunked" and "content-length" not in r.headers
        assert r.json() == [["x"]] + [[i] for i in range(ROWS)]
        metrics = httpx.get(srv.url + "/metrics").text
        assert "radstack_broker_queries_running 0.0" in metrics
