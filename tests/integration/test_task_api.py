"""The Overlord task API through real HTTP: uvicorn + SQLite metadata + local deep storage (and moto S3).

Druid's rollup tutorial (https://druid.apache.org/docs/latest/tutorials/tutorial-rollup): its nine
input events and the five rolled-up rows it documents are written out by hand below.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

# Druid's rollup tutorial: its 9 input events and the 5 rows it documents (one copy, in the unit test)
from tests.unit.test_rollup_tutorial import EVENTS as ROLLUP_EVENTS
from tests.unit.test_rollup_tutorial import EXPECTED as ROLLUP_DOCUMENTED

pytestmark = pytest.mark.slow


def rollup_task(input_source: dict[str, Any], **io: Any) -> dict[str, Any]:
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "rollup-tutorial",
                "dimensionsSpec": {"dimensions": ["srcIP", "dstIP"]},
                "timestampSpec": {"column": "timestamp", "format": "iso"},
                "metricsSpec": [
                    {"type": "count", "name": "count"},
                    {"type": "longSum", "name": "packets", "fieldName": "packets"},
                    {"type": "longSum", "name": "bytes", "fieldName": "bytes"},
                ],
                "granularitySpec": {"type": "uniform", "segmentGranularity": "week", "queryGranularity": "minute",
                                    "intervals": ["2018-01-01/2018-01-03"], "rollup": True},
            },
            "ioConfig": {"type": "index_parallel", "inputSource": input_source, "inputFormat": {"type": "json"},
                         "appendToExisting": False, **io},
            "tuningConfig": {"type": "index_parallel", "maxRowsPerSegment": 5000000, "maxRowsInMemory": 25000},
        },
    }


def simple_task(ds: str, input_source: dict[str, Any], input_format: dict[str, Any], *,
                append: bool = False, tuning: dict[str, Any] | None = None,
                dims: list[Any] | None = None, metrics: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": ds,
                "timestampSpec": {"column": "ts", "format": "auto"},
                "dimensionsSpec": {"dimensions": dims if dims is not None else ["page"]},
                "metricsSpec": metrics if metrics is not None else [
                    {"type": "count", "name": "count"}, {"type": "longSum", "name": "added", "fieldName": "added"}],
                "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "hour", "rollup": True},
            },
            "ioConfig": {"type": "index_parallel", "inputSource": input_source, "inputFormat": input_format,
                         "appendToExisting": append},
            "tuningConfig": {"type": "index_parallel", **(tuning or {})},
        },
    }


def inline_json(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "inline", "data": "\n".join(json.dumps(r) for r in rows)}


def submit(url: str, task: dict[str, Any]) -> str:
    r = httpx.post(f"{url}/druid/indexer/v1/task", json=task, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["task"]


def wait_task(url: str, task_id: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        r = httpx.get(f"{url}/druid/indexer/v1/task/{task_id}/status", timeout=30)
        assert r.status_code == 200, r.text
        st = r.json()["status"]
        if st["status"] != "RUNNING":
            return st
        assert time.monotonic() < deadline, f"task {task_id} still running"
        time.sleep(0.1)


def run_task(url: str, task: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    tid = submit(url, task)
    return tid, wait_task(url, tid)


def metadata_segments(url: str, ds: str) -> list[dict[str, Any]]:
    r = httpx.get(f"{url}/druid/coordinator/v1/metadata/datasources/{ds}/segments?full", timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def read_segment_rows(srv: Any, seg: dict[str, Any], tmp: Path) -> list[dict[str, Any]]:
    ds = srv.ctx.deep_storage
    local = tmp / f"{seg['identifier'].replace(':', '_')}.parquet"
    ds.download(ds.key_for_load_spec(seg["loadSpec"]), local)
    return pq.read_table(local).to_pylist()


def iso(ts: Any) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


def test_status_endpoints(radstack_server: Any) -> None:
    r = httpx.get(f"{radstack_server.url}/status")
    body = r.json()
    assert r.status_code == 200 and isinstance(body["version"], str) and body["modules"] == []
    assert body["memory"]["maxMemory"] > 0
    assert httpx.get(f"{radstack_server.url}/status/health").json() is True


def test_rollup_tutorial_local_source_yields_documented_rows(radstack_server: Any, tmp_path: Path) -> None:
    base = radstack_server.settings.data_dir / "quickstart" / "tutorial"  # local inputs: {home}/data by default
    base.mkdir(parents=True)
    (base / "rollup-data.json").write_text("\n".join(json.dumps(e) for e in ROLLUP_EVENTS) + "\n")
    (base / "other.json").write_text('{"timestamp":"2018-01-01T05:00:00Z","srcIP":"9.9.9.9"}\n')  # filtered out
    url = radstack_server.url
    tid, st = run_task(url, rollup_task({"type": "local", "baseDir": str(base), "filter": "rollup-data.json"}))
    assert st["status"] == "SUCCESS", st
    assert st["dataSource"] == "rollup-tutorial" and st["type"] == "index_parallel" and st["duration"] >= 0
    assert tid.startswith("index_parallel_rollup-tutorial_")

    segs = metadata_segments(url, "rollup-tutorial")
    assert len(segs) == 1
    assert segs[0]["interval"] == "2018-01-01T00:00:00.000Z/2018-01-08T00:00:00.000Z"  # week (Monday)
    rows = read_segment_rows(radstack_server, segs[0], tmp_path)
    got = [(iso(r["__time"]), r["bytes"], r["count"], r["dstIP"], r["packets"], r["srcIP"]) for r in rows]
    assert got == ROLLUP_DOCUMENTED

    rep = httpx.get(f"{url}/druid/indexer/v1/task/{tid}/reports").json()["ingestionStatsAndErrors"]
    assert rep["taskId"] == tid and rep["payload"]["ingestionState"] == "COMPLETED"
    stats = rep["payload"]["rowStats"]["buildSegments"]
    assert stats["processed"] == 9 and stats["unparseable"] == 0 and stats["thrownAway"] == 0
    assert stats["processedBytes"] == (base / "rollup-data.json").stat().st_size

    payload = httpx.get(f"{url}/druid/indexer/v1/task/{tid}").json()
    assert payload["task"] == tid and payload["payload"]["spec"]["dataSchema"]["dataSource"] == "rollup-tutorial"


def test_csv_and_parquet_tasks(radstack_server: Any, tmp_path: Path) -> None:
    url = radstack_server.url
    csv_dir = radstack_server.settings.data_dir / "csv"
    csv_dir.mkdir(parents=True)
    (csv_dir / "a.csv").write_text("ts,page,added\n2020-01-01T00:10:00Z,home,3\n2020-01-01T00:20:00Z,home,4\n"
                                   "2020-01-02T08:00:00Z,about,10\n")
    _, st = run_task(url, simple_task("csv_ds", {"type": "local", "baseDir": str(csv_dir), "filter": "*.csv"},
                                      {"type": "csv", "findColumnsFromHeader": True}))
    assert st["status"] == "SUCCESS", st
    segs = sorted(metadata_segments(url, "csv_ds"), key=lambda s: s["interval"])
    assert [s["interval"][:10] for s in segs] == ["2020-01-01", "2020-01-02"]
    rows = read_segment_rows(radstack_server, segs[0], tmp_path)
    assert [(r["page"], r["count"], r["added"]) for r in rows] == [("home", 2, 7)]

    pq_path = radstack_server.settings.data_dir / "in.parquet"
    pq.write_table(pa.table({"ts": ["2020-03-01T01:00:00Z", "2020-03-01T01:30:00Z", "2020-03-01T02:00:00Z"],
                             "page": ["x", "x", "y"], "added": [1, 2, 5]}), pq_path)
    _, st = run_task(url, simple_task("pq_ds", {"type": "local", "files": [str(pq_path)]}, {"type": "parquet"}))
    assert st["status"] == "SUCCESS", st
    (seg,) = metadata_segments(url, "pq_ds")
    rows = read_segment_rows(radstack_server, seg, tmp_path)
    assert [(iso(r["__time"]), r["page"], r["count"], r["added"]) for r in rows] == [
        ("2020-03-01T01:00:00.000Z", "x", 2, 3), ("2020-03-01T02:00:00.000Z", "y", 1, 5)]


def test_overwrite_overshadows_and_append_adds_partitions(radstack_server: Any, tmp_path: Path) -> None:
    url = radstack_server.url
    day1 = [{"ts": "2021-05-01T03:00:00Z", "page": "a", "added": 1}]
    _, st = run_task(url, simple_task("ow", inline_json(day1), {"type": "json"}))
    assert st["status"] == "SUCCESS", st
    (v1,) = metadata_segments(url, "ow")

    day1b = [{"ts": "2021-05-01T04:00:00Z", "page": "b", "added": 2}]
    _, st = run_task(url, simple_task("ow", inline_json(day1b), {"type": "json"}))
    assert st["status"] == "SUCCESS", st
    r = httpx.get(f"{url}/druid/coordinator/v1/datasources/ow/segments?full").json()
    assert len(r) == 1 and r[0]["version"] > v1["version"], "the served timeline shows the new version only"
    v2 = r[0]
    assert v2["shardSpec"] == {"type": "numbered", "partitionNum": 0, "partitions": 1}

    # the coordinator duty marks the overshadowed v1 unused
    deadline = time.monotonic() + 20
    while True:
        rr = httpx.get(f"{url}/druid/coordinator/v1/metadata/datasources/ow/segments/{v1['identifier']}")
        if rr.status_code == 404:
            break
        assert time.monotonic() < deadline, "v1 never became unused"
        time.sleep(0.1)
    assert rr.json()["category"] == "NOT_FOUND"
    unused = httpx.get(f"{url}/druid/coordinator/v1/metadata/datasources/ow/segments/{v1['identifier']}",
                       params={"includeUnused": "true"})
    assert unused.status_code == 200 and unused.json()["identifier"] == v1["identifier"]

    # append: a new partition of v2's version, numbered after v2's partitions, partitions=0
    day1c = [{"ts": "2021-05-01T05:00:00Z", "page": "c", "added": 4}]
    _, st = run_task(url, simple_task("ow", inline_json(day1c), {"type": "json"}, append=True))
    assert st["status"] == "SUCCESS", st
    segs = sorted(metadata_segments(url, "ow"), key=lambda s: s["shardSpec"]["partitionNum"])
    assert [s["version"] for s in segs] == [v2["version"], v2["version"]]
    assert segs[1]["shardSpec"] == {"type": "numbered", "partitionNum": 1, "partitions": 0}
    assert segs[1]["identifier"].endswith("_1")
    pages = sorted(r["page"] for s in segs for r in read_segment_rows(radstack_server, s, tmp_path))
    assert pages == ["b", "c"]
    served = httpx.get(f"{url}/druid/coordinator/v1/datasources/ow/segments").json()
    assert sorted(served) == sorted(s["identifier"] for s in segs)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"type": "index_parallel", "spec": {"ioConfig": {}}}, "spec.dataSchema"),
        ({"type": "index_hadoop", "spec": {}}, "type"),
        ({"type": "compact", "spec": {}}, "dataSource"),  # compact is a task type now (radstack.storage.compaction)
        (simple_task("x", {"type": "carrier-pigeon"}, {"type": "json"}), "spec.ioConfig.inputSource.type"),
        (simple_task("x", inline_json([]), {"type": "json"}, tuning={"maxParseExceptions": "many"}),
         "spec.tuningConfig.maxParseExceptions"),
    ],
)
def test_bad_specs_are_400_druid_errors(radstack_server: Any, body: dict[str, Any], field: str) -> None:
    r = httpx.post(f"{radstack_server.url}/druid/indexer/v1/task", json=body)
    assert r.status_code == 400, r.text
    err = r.json()
    assert err["error"] == "druidException" and err["category"] == "INVALID_INPUT"
    assert err["errorMessage"].startswith(field + ":"), err["errorMessage"]


def test_malformed_json_body_and_unknown_task(radstack_server: Any) -> None:
    url = radstack_server.url
    r = httpx.post(f"{url}/druid/indexer/v1/task", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["category"] == "INVALID_INPUT"
    r = httpx.get(f"{url}/druid/indexer/v1/task/nope/status")
    assert r.status_code == 404 and r.json()["error"] == "druidException"
    r = httpx.get(f"{url}/druid/indexer/v1/no-such-endpoint")
    assert r.status_code == 404 and r.json()["category"] == "NOT_FOUND"


def test_unparseable_rows_are_counted_and_kept(radstack_server: Any) -> None:
    url = radstack_server.url
    data = "\n".join([
        '{"ts":"2022-01-01T00:00:00Z","page":"a","added":1}',
        "this is not json",
        '{"ts":"not-a-time","page":"b","added":2}',
        '{"ts":"2022-01-01T01:00:00Z","page":"c","added":3}',
    ])
    tid, st = run_task(url, simple_task("unp", {"type": "inline", "data": data}, {"type": "json"}))
    assert st["status"] == "SUCCESS", st
    payload = httpx.get(f"{url}/druid/indexer/v1/task/{tid}/reports").json()["ingestionStatsAndErrors"]["payload"]
    stats = payload["rowStats"]["buildSegments"]
    assert stats["processed"] == 2 and stats["unparseable"] == 2
    events = payload["unparseableEvents"]["buildSegments"]
    assert len(events) == 2 and {e["errorType"] for e in events} == {"unparseable"}
    assert any("this is not json" in e["input"] for e in events)
    assert any("not-a-time" in e["input"] for e in events)


def test_max_parse_exceptions_fails_the_task(radstack_server: Any) -> None:
    url = radstack_server.url
    data = '{"ts":"2022-01-01T00:00:00Z","page":"a","added":1}\n{broken\n{also broken\n'
    tid, st = run_task(url, simple_task("maxp", {"type": "inline", "data": data}, {"type": "json"},
                                        tuning={"maxParseExceptions": 1}))
    assert st["status"] == "FAILED"
    assert "Max parse exceptions[1] exceeded" in st["errorMsg"]
    assert metadata_segments(url, "maxp") == []
    rep = httpx.get(f"{url}/druid/indexer/v1/task/{tid}/reports").json()["ingestionStatsAndErrors"]["payload"]
    assert rep["errorMsg"] == st["errorMsg"] and rep["rowStats"]["buildSegments"]["unparseable"] == 2


class _SlowHandler(http.server.BaseHTTPRequestHandler):
    stop = threading.Event()

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.end_headers()
        for i in range(600):
            if self.stop.is_set():
                return
            try:
                self.wfile.write(json.dumps({"ts": f"2023-01-01T00:{i % 60:02d}:00Z", "page": "p", "added": 1})
                                 .encode() + b"\n")
                self.wfile.flush()
            except OSError:
                return
            time.sleep(0.05)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def slow_http() -> Iterator[str]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SlowHandler)
    _SlowHandler.stop.clear()
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/events.json"
    finally:
        _SlowHandler.stop.set()
        srv.shutdown()
        srv.server_close()


def test_shutdown_stops_a_task_and_publishes_nothing(radstack_home: Path, slow_http: str) -> None:
    from tests.fixtures.server import running_server

    with running_server(radstack_home, {"ingestion": {"http": {"allowed_hosts": ["127.0.0.1"]}}}) as srv:
        _shutdown_stops_a_task(srv.url, slow_http)


def _shutdown_stops_a_task(url: str, slow_http: str) -> None:
    tid = submit(url, simple_task("slow", {"type": "http", "uris": [slow_http]}, {"type": "json"}))
    deadline = time.monotonic() + 10
    while httpx.get(f"{url}/druid/indexer/v1/task/{tid}/reports").json()["ingestionStatsAndErrors"][
            "payload"]["rowStats"]["buildSegments"]["processedBytes"] == 0:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    running = httpx.get(f"{url}/druid/indexer/v1/tasks", params={"state": "running"}).json()
    assert [t["id"] for t in running] == [tid] and running[0]["runnerStatusCode"] == "RUNNING"
    r = httpx.post(f"{url}/druid/indexer/v1/task/{tid}/shutdown")
    assert r.status_code == 200 and r.json() == {"task": tid}
    st = wait_task(url, tid, timeout=30)
    assert st["status"] == "FAILED" and "Shutdown" in st["errorMsg"]
    assert metadata_segments(url, "slow") == []
    assert httpx.post(f"{url}/druid/indexer/v1/task/{tid}/shutdown").status_code == 404
    complete = httpx.get(f"{url}/druid/indexer/v1/tasks", params={"state": "complete", "datasource": "slow"}).json()
    assert [t["id"] for t in complete] == [tid]
    assert httpx.get(f"{url}/druid/indexer/v1/tasks", params={"state": "bogus"}).status_code == 400


def test_s3_input_source(radstack_home: Path, moto_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3

    from tests.fixtures.server import running_server

    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                 "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(k, v)
    s3 = boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1")
    s3.create_bucket(Bucket="raw-events")
    lines = [json.dumps({"ts": f"2024-02-0{d}T10:00:00Z", "page": f"p{d}", "added": d}) for d in (1, 2)]
    s3.put_object(Bucket="raw-events", Key="in/part-1.json", Body=lines[0].encode())
    s3.put_object(Bucket="raw-events", Key="in/part-2.json", Body=lines[1].encode())
    with running_server(radstack_home, {"deep_storage": {"endpoint_url": moto_server},
                                        "ingestion": {"s3_buckets": ["raw-events"]}}) as srv:
        _, st = run_task(srv.url, simple_task("s3ds", {"type": "s3", "prefixes": ["s3://raw-events/in/"]},
                                              {"type": "json"}))
        assert st["status"] == "SUCCESS", st
        segs = metadata_segments(srv.url, "s3ds")
        assert sorted(s["interval"][:10] for s in segs) == ["2024-02-01", "2024-02-02"]
        _, st = run_task(srv.url, simple_task("s3ds2", {"type": "s3", "uris": ["s3://raw-events/in/missing.json"]},
                                              {"type": "json"}))
        assert st["status"] == "FAILED" and st["errorMsg"]


def test_a_task_whose_every_row_is_unparseable_fails(radstack_server: Any) -> None:
    # Druid would end SUCCESS with nothing published; radstack says what happened
    url = radstack_server.url
    tid, st = run_task(url, simple_task("allbad", {"type": "inline", "data": "{broken\nnot json either\n"},
                                        {"type": "json"}))
    assert st["status"] == "FAILED"
    assert "all 2 input rows were unparseable" in st["errorMsg"]
    assert metadata_segments(url, "allbad") == []
