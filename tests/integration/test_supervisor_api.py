"""Druid's supervisor API drives radstack's streaming job: the spec of Druid's "Load from Apache Kafka"
tutorial, unchanged but for its topic, is posted to the real server; the streaming process's
supervisor loop (``realtime.streaming.supervised``, as ``radctl stream`` runs it) starts a Spark query
for it; then status with the lag per partition from Kafka, suspend (the query stops, the lag grows),
resume (it catches up), reset, sys.supervisors, and terminate (the query stops, the supervisor is
gone, its data stays)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.fixtures.server import running_server

pytestmark = pytest.mark.slow

DS = "kttm-kafka"


def tutorial_spec(topic: str) -> dict[str, Any]:
    """Druid 33's tutorial supervisor spec (docs: "Load from Apache Kafka"), with the test's topic."""
    return {
        "type": "kafka",
        "spec": {
            "ioConfig": {
                "type": "kafka",
                "consumerProperties": {"bootstrap.servers": "localhost:9092"},
                "topic": topic,
                "inputFormat": {"type": "json"},
                "useEarliestOffset": True,
            },
            "tuningConfig": {"type": "kafka"},
            "dataSchema": {
                "dataSource": DS,
                "timestampSpec": {"column": "timestamp", "format": "iso"},
                "dimensionsSpec": {"dimensions": [
                    "session", "number", "client_ip", "language", "adblock_list", "app_version", "path",
                    "loaded_image", "referrer", "referrer_host", "server_ip", "screen", "window",
                    {"type": "long", "name": "session_length"}, "timezone", "timezone_offset"]},
                "granularitySpec": {"queryGranularity": "none", "rollup": False, "segmentGranularity": "day"},
            },
        },
    }


def produce(bootstrap: str, topic: str, start: int, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(start, start + n):
        p.produce(topic, orjson.dumps({
            "timestamp": f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z", "session": f"S{i % 7}",
            "number": str(i), "language": ["en", "de", "ja"][i % 3], "session_length": i * 10,
            "path": "/", "screen": "1920x1080"}), key=str(i).encode())
    p.flush(10)


def wait_for(check: Callable[[], bool], reconcile: Callable[[], None], timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        reconcile()
        if check():
            return
        assert time.monotonic() < deadline, "timed out"
        time.sleep(1.0)


def test_supervisor_api_drives_the_streaming_job(radstack_home: Path, kafka_bootstrap: str, stream_spark: Any) -> None:
    from radstack.storage.metadata import MetadataStore
    from realtime.streaming.job import stream_options
    from realtime.streaming.supervised import SupervisedStreams
    from realtime.topics import ensure_topics

    topic = f"kttm-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_bootstrap, {topic: 2})
    produce(kafka_bootstrap, topic, 0, 200)
    overrides = {"kafka": {"embedded": False, "bootstrap_servers": kafka_bootstrap}}
    with running_server(radstack_home, overrides) as srv, httpx.Client(base_url=srv.url, timeout=60) as http:
        api = "/druid/indexer/v1/supervisor"
        assert http.post(api, json=tutorial_spec(topic)).json() == {"id": DS}
        assert http.get(api).json() == [DS]
        md = MetadataStore.from_settings(srv.settings)
        streams = SupervisedStreams(srv.settings, md, stream_options(srv.settings, handoff=False, trigger_seconds=0.5),
                                    spark=stream_spark)

        def rows() -> int:
            srv.ctx.broker.refresh(force=True)
            r = http.post("/druid/v2/sql", json={"query": f'SELECT COUNT(*) AS n FROM "{DS}"'})
            return r.json()[0]["n"] if r.status_code == 200 else 0

        def status() -> dict[str, Any]:
            return http.get(f"{api}/{DS}/status").json()["payload"]

        try:
            # started by the streaming process's supervisor loop; everything from the earliest offset
            wait_for(lambda: rows() == 200 and status()["aggregateLag"] == 0, streams.reconcile)
            st = status()
            assert st["state"] == "RUNNING" and st["stream"] == topic and st["partitions"] == 2
            assert sum(st["committedOffsets"].values()) == 200 == sum(st["latestOffsets"].values())
            assert http.get(f"{api}?state=true").json() == [
                {"id": DS, "state": "RUNNING", "detailedState": "RUNNING", "healthy": True, "suspended": False}]
            sys_rows = http.post("/druid/v2/sql", json={"query": "SELECT supervisor_id, state, type, source, suspended "
                                                                 "FROM sys.supervisors"}).json()
            assert sys_rows == [{"supervisor_id": DS, "state": "RUNNING", "type": "kafka", "source": topic,
                                 "suspended": 0}]

            # suspend: the query stops; new events wait in Kafka and show as lag
            assert http.post(f"{api}/{DS}/suspend").json()["suspended"] is True
            streams.reconcile()
            assert streams.jobs == {}
            produce(kafka_bootstrap, topic, 200, 50)
            st = status()
            assert st["state"] == "SUSPENDED" and st["aggregateLag"] == 50
            assert sum(st["minimumLag"].values()) == 50 and rows() == 200

            # resume: it catches up from its committed offsets
            assert http.post(f"{api}/{DS}/resume").json()["suspended"] is False
            wait_for(lambda: rows() == 250 and status()["aggregateLag"] == 0, streams.reconcile)

            # reset: the offsets are forgotten; with useEarliestOffset the query reads the topic again
            # (real-time segments are appends, so the same events are counted twice — as in Druid)
            assert http.post(f"{api}/{DS}/reset").json() == {"id": DS}
            wait_for(lambda: rows() == 500, streams.reconcile)

            # terminate: the query stops, the supervisor is gone, the data stays
            assert http.post(f"{api}/{DS}/terminate").json() == {"id": DS}
            streams.reconcile()
            assert streams.jobs == {} and http.get(api).json() == []
            assert http.get(f"{api}/{DS}/status").status_code == 404
            assert rows() == 500
        finally:
            streams.stop()
            md.close()


def test_bad_supervisor_specs_are_refused(server_client: Any) -> None:
    api = "/druid/indexer/v1/supervisor"
    for bad in ({"type": "kinesis", "spec": {}}, {"type": "kafka", "spec": {"dataSchema": {"dataSource": "x"}}},
                {"type": "kafka", "spec": {"ioConfig": {"topic": "t", "inputFormat": {"type": "csv"}},
                                           "dataSchema": {"dataSource": "x", "timestampSpec": {"column": "t"}}}}):
        r = server_client.post(api, json=bad)
        assert r.status_code == 400 and r.json()["error"] == "druidException", r.text
    assert server_client.get(f"{api}/nope/status").status_code == 404
    assert server_client.post(f"{api}/nope/suspend").status_code == 404
