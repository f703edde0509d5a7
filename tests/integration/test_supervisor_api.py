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


def wait_for(check: Callable[[], bool], reconcile: Callable[[], None], timeout: float = 180.0,
             seen: list[Any] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while True:
        reconcile()
        if check():
            return
        assert time.monotonic() < deadline, f"timed out; last seen {(seen or [])[-3:]}"
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


def test_a_supervisor_gets_the_batch_side_too(radstack_home: Path, kafka_bootstrap: str, stream_spark: Any,
                                               tmp_path: Path) -> None:
    """#36 item 4: a datasource created by posting Druid's tutorial supervisor spec gets both halves.
    The stream (the supervisor loop) throws late events away; the archiver, already running for
    another topic, takes up the supervisor's topic by itself; `radctl backfill` rebuilds the day from
    the archive with the supervisor's dataSchema and the answer is the exact truth (late events
    recovered, re-sent events counted once); `radctl supervisor export` writes the same spec as a file."""
    import os
    import subprocess
    import sys

    import yaml
    from typer.testing import CliRunner

    from batch.backfill import plan_backfill
    from operations.cli import app as radctl
    from radstack.datasources import load_catalog
    from radstack.storage.deep_storage import open_deep_storage
    from radstack.storage.metadata import MetadataStore
    from radstack.storage.supervisors import datasource_spec
    from realtime.archiver import Archiver
    from realtime.archiver.settings import archiver_config, topics_source
    from realtime.streaming.job import stream_options
    from realtime.streaming.supervised import SupervisedStreams
    from realtime.topics import ensure_topics

    topic, other = f"kttm-{uuid.uuid4().hex[:8]}", f"other-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_bootstrap, {topic: 2, other: 1})
    spec = tutorial_spec(topic)
    spec["spec"]["ioConfig"]["lateMessageRejectionPeriod"] = "PT10M"  # Druid's own field → the window period
    spec["processing"] = {"eventId": "number"}  # radstack's extension: what a re-sent event repeats

    def send(numbers: list[int], minute_of: Callable[[int], int]) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": kafka_bootstrap})
        for i in numbers:
            m = minute_of(i)
            p.produce(topic, orjson.dumps({"timestamp": f"2026-01-01T{m // 60:02d}:{m % 60:02d}:{i % 60:02d}Z",
                                           "session": f"S{i % 7}", "number": str(i), "language": "en",
                                           "session_length": i}), key=str(i).encode())
        p.flush(10)

    overrides = {"kafka": {"embedded": False, "bootstrap_servers": kafka_bootstrap}}
    with running_server(radstack_home, overrides) as srv, httpx.Client(base_url=srv.url, timeout=60) as http:
        settings = srv.settings
        md = MetadataStore.from_settings(settings)
        cfg = archiver_config(settings)
        assert cfg.topics == []  # no spec file, no supervisor yet
        cfg.topics, cfg.max_age_seconds, cfg.group_id = [other], 1.0, f"archiver-{topic}"
        archiver = Archiver(cfg, open_deep_storage(settings), md, topics_source=topics_source(settings))
        assert archiver.refresh_topics() == []

        assert http.post("/druid/indexer/v1/supervisor", json=spec).json() == {"id": DS}
        assert topic in archiver_config(settings).topics
        assert archiver.refresh_topics() == [topic]  # a running archiver takes the new topic up

        streams = SupervisedStreams(settings, md, stream_options(settings, handoff=False, trigger_seconds=0.5),
                                    spark=stream_spark)

        def rows() -> int:
            srv.ctx.broker.refresh(force=True)
            r = http.post("/druid/v2/sql", json={"query": f'SELECT COUNT(*) AS n FROM "{DS}"'})
            return r.json()[0]["n"] if r.status_code == 200 else 0

        try:
            send(list(range(300)), lambda i: 60 + i % 30)  # 01:00-01:29, on time
            seen: list[int] = []
            wait_for(lambda: seen.append(rows()) or seen[-1] == 300, streams.reconcile, seen=seen)
            send(list(range(300, 340)), lambda i: 5)  # 00:05: 85 minutes behind, past the window period
            send(list(range(0, 300, 10)), lambda i: 60 + i % 30)  # 30 re-sent events (same number and time)
            send(list(range(340, 350)), lambda i: 90)  # 01:30, on time: the stream has read everything before
            wait_for(lambda: seen.append(rows()) or seen[-1] == 310, streams.reconcile, seen=seen)
            streams.reconcile()
        finally:
            streams.stop()
        realtime = rows()
        truth = 350  # distinct numbers
        assert realtime == 310  # 40 late events thrown away, 30 re-sent ones dropped

        archiver.run(idle_exit_seconds=6)
        assert archiver.stats.records == 380  # every record of the topic archived once: re-sends included

        plan = plan_backfill(settings, "2026-01-01/P1D", DS)  # radctl backfill knows the datasource
        assert list(plan.chunks) == [DS]
        env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
        env.update({"RADSTACK_HOME": str(radstack_home), "RADSTACK_SPARK__SHUFFLE_PARTITIONS": "2"})
        proc = subprocess.run([sys.executable, "-m", "operations", "backfill", "--interval", "2026-01-01/P1D",
                               "--datasource", DS, "--via", "local", "--force", "--json"],
                              env=env, capture_output=True, text=True, timeout=900, check=False)  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        deadline = time.monotonic() + 60
        while rows() != truth and time.monotonic() < deadline:
            time.sleep(1)
        assert rows() == truth
        late = http.post("/druid/v2/sql", json={"query": f"SELECT COUNT(*) AS n FROM \"{DS}\" "
                                                         "WHERE __time < TIMESTAMP '2026-01-01 01:00:00'"}).json()
        assert late == [{"n": 40}]
        print(f"\nsupervisor {DS}: produced 380 records (350 distinct), real time {realtime}, "
              f"archived {archiver.stats.records}, rebuilt {rows()}")

        # the spec file equivalent to the supervisor: same dataSchema and processing
        out = tmp_path / "specs" / f"{DS}.yaml"
        out.parent.mkdir()
        result = CliRunner().invoke(radctl, ["supervisor", "export", DS, "--output", str(out)],
                                    env={"RADSTACK_HOME": str(radstack_home)})
        assert result.exit_code == 0, result.output
        exported = yaml.safe_load(out.read_text())
        assert exported["dataSchema"] == spec["spec"]["dataSchema"]
        assert exported["processing"] == {"topics": [topic], "windowPeriod": "PT10M", "eventId": "number"}
        as_file = load_catalog(settings.model_copy(update={"datasources": settings.datasources.model_copy(
            update={"dir": str(out.parent)})}))[DS]
        assert as_file.data_schema == datasource_spec(settings, DS, md).data_schema
        assert (as_file.processing.event_id, list(as_file.processing.topics)) == ("number", [topic])
        md.close()
