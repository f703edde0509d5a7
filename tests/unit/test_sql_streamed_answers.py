"""A SQL answer larger than one batch, and a native ``scan``, are streamed (chunked, no Content-Length) and
arrive whole; a streamed answer holds its query's slot until the last chunk is taken, and a client that
leaves mid-answer frees it (serving/broker/connection.py, serving/broker/native/__init__.py)."""

from __future__ import annotations

import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pyarrow as pa
import pytest

from serving.broker.native.scan import FIRST_PIECE_ROWS, PIECE_BYTES, PieceSize
from tests.fixtures.broker import WIKI_SCHEMA, index_and_publish
from tests.fixtures.server import RunningServer, running_server

ROWS = 20_000  # five batches of 4,096
SCAN_ROWS = 60_000


def _no_query_running(url: str, seconds: float = 2.0) -> bool:
    """The slot is given back when the stream's iterator is closed, just after its last chunk is sent."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if "radstack_broker_queries_running 0.0" in httpx.get(url + "/metrics").text:
            return True
        time.sleep(0.02)
    return False


def test_a_streamed_answer_arrives_whole_and_frees_its_slot() -> None:
    values = ",".join(str(i) for i in range(ROWS))
    with tempfile.TemporaryDirectory() as home, running_server(Path(home)) as srv:
        r = httpx.post(srv.url + "/druid/v2/sql", json={
            "query": f"SELECT x FROM UNNEST(ARRAY[{values}]) AS u(x)", "resultFormat": "array", "header": True},
                       timeout=60)
        assert r.status_code == 200
        assert r.headers.get("transfer-encoding") == "chunked" and "content-length" not in r.headers
        assert r.json() == [["x"]] + [[i] for i in range(ROWS)]
        assert _no_query_running(srv.url)


@pytest.fixture(scope="module")
def big() -> Iterator[RunningServer]:
    with tempfile.TemporaryDirectory() as home, running_server(Path(home)) as srv:
        n = SCAN_ROWS
        table = pa.table({"ts": [f"2024-01-0{1 + i % 3}T{i % 24:02d}:{i % 60:02d}:00Z" for i in range(n)],
                          "page": [f"page-{i}" for i in range(n)], "user": [f"u{i % 97}" for i in range(n)],
                          "country": ["US"] * n, "ns": list(range(n)), "added": list(range(n)),
                          "delta": [0.5] * n})
        schema = {**WIKI_SCHEMA, "dataSource": "big", "granularitySpec": {
            "segmentGranularity": "day", "queryGranularity": "none", "rollup": False}}
        index_and_publish(srv.ctx.metadata, srv.ctx.deep_storage, table, schema)
        srv.ctx.broker.refresh(force=True)
        yield srv


SCAN = {"queryType": "scan", "dataSource": "big", "intervals": ["2024-01-01/2024-01-04"], "batchSize": 4096,
        "columns": ["__time", "page", "added"]}


WIDE = {"virtualColumns": [{"type": "expression", "name": "v", "expression": "repeat(page, 2000)",
                             "outputType": "STRING"}], "columns": ["__time", "v"], "limit": 3000}


@pytest.mark.parametrize("extra", [{}, {"resultFormat": "compactedList"}, {"order": "descending"},
                                   {"limit": 10_000, "offset": 5000}, WIDE, {**WIDE, "order": "ascending"}])
def test_a_native_scan_is_streamed_and_answers_as_the_whole_answer_did(big: RunningServer, extra: dict) -> None:
    query = {**SCAN, **extra}
    streamed = httpx.post(big.url + "/druid/v2", json=query, timeout=60)
    whole = httpx.post(big.url + "/druid/v2?pretty", json=query, timeout=60)  # pretty: built whole, as before
    assert streamed.status_code == whole.status_code == 200
    assert streamed.headers.get("transfer-encoding") == "chunked" and "content-length" not in streamed.headers
    assert "content-length" in whole.headers
    body = orjson.loads(streamed.content)
    if extra.get("order") in ("ascending", "descending"):
        # rows of the same __time may come in either order (SQL leaves ties undefined): the same times in
        # the same order, and the same rows
        def events(b: list[dict]) -> list[dict]:
            return [e for batch in b for e in batch["events"]]

        ours, theirs = events(body), events(orjson.loads(whole.content))
        assert [e["__time"] for e in ours] == [e["__time"] for e in theirs]
        assert sorted(map(orjson.dumps, ours)) == sorted(map(orjson.dumps, theirs))
    else:
        assert body == orjson.loads(whole.content)
    rows = sum(len(b["events"]) for b in body)
    assert rows == extra.get("limit", SCAN_ROWS) and all(len(b["events"]) <= 4096 for b in body)
    assert _no_query_running(big.url)


def test_a_scan_error_before_the_first_batch_is_still_druids_error(big: RunningServer) -> None:
    r = httpx.post(big.url + "/druid/v2", json={**SCAN, "resultFormat": "nonsense"})
    assert r.status_code == 400 and r.json()["error"] == "druidException"


def test_a_client_that_leaves_mid_scan_frees_the_slot(big: RunningServer) -> None:
    host, port = big.url.removeprefix("http://").split(":")
    payload = orjson.dumps({**SCAN, "batchSize": 100})
    with socket.create_connection((host, int(port))) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b"POST /druid/v2 HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)
        assert s.recv(12).startswith(b"HTTP/1.1 200")
    assert _no_query_running(big.url, seconds=5.0)


def test_wide_rows_are_fetched_a_few_at_a_time() -> None:
    """The scan asks DuckDB for about PIECE_BYTES of rows: ~20 KB rows a hundred at a time, narrow rows the
    most, and the first fetch (widths unknown) small."""
    piece = PieceSize(512)
    assert piece.rows() == FIRST_PIECE_ROWS
    piece.saw(FIRST_PIECE_ROWS, FIRST_PIECE_ROWS * 20_000)
    assert piece.rows() == PIECE_BYTES // 20_000
    piece.saw(100, 100 * 50)
    assert piece.rows() == 512
    piece.saw(3, 3 * 50 * 2**20)
    assert piece.rows() == 1
