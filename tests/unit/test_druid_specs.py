"""Druid ingestion specs generated from datasource specs (radstack/druid_cluster/specs.py), the
``radctl druid specs`` command, and the Overlord client against a scripted Druid-shaped server
(httpx.MockTransport; the real Druid and radstack's own task API are in
tests/integration/test_druid_cluster.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from radstack.config import DeepStorageSettings, Settings
from radstack.druid_cluster.specs import (
    DruidSpecError,
    SegmentFiles,
    chunk_interval,
    druid_specs,
    index_parallel_spec,
    input_source_for,
    kafka_supervisor_spec,
    processed_topic,
    visible_segment_files,
)
from radstack.druid_cluster.submit import DruidApiError, OverlordClient, TaskFailedError
from radstack.spec import load_datasource_spec
from radstack.storage.segments import DataSegment, ShardSpec
from radstack.time.intervals import Interval, parse_instant

REPO = Path(__file__).resolve().parents[2]
ADS = REPO / "examples" / "ads" / "ads.yaml"
H = 3600_000
T0 = parse_instant("2026-01-01T00:00:00Z")


@pytest.fixture
def ads() -> Any:
    return load_datasource_spec(ADS)


def seg(start: int, end: int, version: str, pn: int = 0, parts: int = 1, *, load: dict[str, Any] | None = None,
        typ: str = "numbered") -> DataSegment:
    path = f"/ds/segments/ads/{start}_{end}/{version}/{pn}/data.parquet"
    return DataSegment("ads", Interval(start, end), version, load_spec=load or {"type": "local", "path": path},
                       shard_spec=ShardSpec(typ, pn, parts))


# ---- supervisor ----------------------------------------------------------------------------------


def test_supervisor_spec_reads_the_processed_topic(ads: Any) -> None:
    sup = kafka_supervisor_spec(ads, bootstrap_servers="kafka-1:9092,kafka-2:9092")
    assert sup["type"] == "kafka"
    io = sup["spec"]["ioConfig"]
    assert io["topic"] == "ads-processed"
    assert io["consumerProperties"] == {"bootstrap.servers": "kafka-1:9092,kafka-2:9092"}
    assert io["inputFormat"] == {"type": "json"}
    assert io["lateMessageRejectionPeriod"] == "PT10M"  # the datasource's windowPeriod
    ds = sup["spec"]["dataSchema"]
    assert ds["dataSource"] == "ads"
    assert ds["timestampSpec"] == {"column": "__time", "format": "millis"}
    assert [d["name"] for d in ds["dimensionsSpec"]["dimensions"]] == ["publisher", "advertiser", "gender", "city"]
    # processed rows are not rolled up: the original aggregators over the input fields
    assert ds["metricsSpec"] == [{"type": "count", "name": "count"},
                                 {"type": "doubleSum", "name": "price", "fieldName": "price"},
                                 {"type": "doubleMax", "name": "max_price", "fieldName": "price"}]
    assert ds["granularitySpec"]["segmentGranularity"] in ("hour", "HOUR", {"type": "hour"})
    assert "intervals" not in ds["granularitySpec"] and "transformSpec" not in ds
    assert sup["spec"]["tuningConfig"]["type"] == "kafka"


def test_projections_are_exported_in_druid_terms(ads: Any) -> None:
    """radstack's projection aggregators read metrics; a supervisor's read input fields, so they are
    rewritten; the segment re-index reads the rolled-up metric columns and keeps them as they are."""
    from dataclasses import replace

    from radstack.spec import parse_data_schema

    raw = ads.data_schema.to_json()
    raw["projections"] = [
        {"type": "aggregate", "name": "by_publisher", "groupingColumns": ["publisher"],
         "aggregators": [{"type": "longSum", "name": "count", "fieldName": "count"},
                         {"type": "doubleSum", "name": "price", "fieldName": "price"},
                         {"type": "doubleMax", "name": "max_price", "fieldName": "max_price"}]},
        {"type": "aggregate", "name": "odd", "groupingColumns": ["city"],
         "aggregators": [{"type": "doubleMin", "name": "lowest_max", "fieldName": "max_price"}]},
    ]
    spec = replace(ads, data_schema=parse_data_schema(raw))
    [exported] = kafka_supervisor_spec(spec, bootstrap_servers="k:9092")["spec"]["dataSchema"]["projections"]
    assert exported["name"] == "by_publisher"  # "odd" (a min over a max) has no input-column form
    assert exported["aggregators"] == [{"type": "count", "name": "count"},
                                       {"type": "doubleSum", "name": "price", "fieldName": "price"},
                                       {"type": "doubleMax", "name": "max_price", "fieldName": "price"}]
    reindex = index_parallel_spec(spec, Interval(T0, T0 + H), input_source_for(SegmentFiles("local", ("/x/data.parquet",))))
    assert [p["name"] for p in reindex["spec"]["dataSchema"]["projections"]] == ["by_publisher", "odd"]


def test_processed_topic_override_and_transform_spec_dropped() -> None:
    spec = load_datasource_spec({
        "dataSchema": {
            "dataSource": "clicks",
            "timestampSpec": {"column": "ts", "format": "iso"},
            "dimensionsSpec": {"dimensions": ["page", {"type": "long", "name": "user_id"}]},
            "metricsSpec": [{"type": "longSum", "name": "n", "fieldName": "n"}],
            "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "hour"},
            "transformSpec": {"transforms": [{"type": "expression", "name": "page", "expression": "upper(page)"}]},
        },
        "processing": {"topics": ["clicks"], "processedTopic": "clicks-enriched", "windowPeriod": "PT1H"},
    })
    assert processed_topic(spec) == "clicks-enriched"
    sup = kafka_supervisor_spec(spec, bootstrap_servers="k:9092", task_count=2, consumer_properties={"security.protocol": "SSL"})
    assert sup["spec"]["ioConfig"]["topic"] == "clicks-enriched"
    assert sup["spec"]["ioConfig"]["taskCount"] == 2
    assert sup["spec"]["ioConfig"]["consumerProperties"]["security.protocol"] == "SSL"
    assert sup["spec"]["ioConfig"]["lateMessageRejectionPeriod"] == "PT1H"
    assert "transformSpec" not in sup["spec"]["dataSchema"]  # applied before the topic
    assert {"type": "long", "name": "user_id"} in sup["spec"]["dataSchema"]["dimensionsSpec"]["dimensions"]
    with pytest.raises(DruidSpecError):
        kafka_supervisor_spec(spec, bootstrap_servers="")


# ---- index_parallel ------------------------------------------------------------------------------


def test_chunk_interval_widens_to_segment_granularity(ads: Any) -> None:
    iv = Interval(T0 + 90 * 60_000, T0 + 2 * H + 1)
    assert chunk_interval(ads, iv) == Interval(T0 + H, T0 + 3 * H)
    assert chunk_interval(ads, Interval(T0, T0 + H)) == Interval(T0, T0 + H)


def test_index_parallel_spec_reindexes_rolled_up_files(ads: Any) -> None:
    iv = Interval(T0, T0 + 2 * H)
    task = index_parallel_spec(ads, iv, {"type": "local", "files": ["/a/data.parquet"]})
    assert task["type"] == "index_parallel"
    spec = task["spec"]
    io = spec["ioConfig"]
    assert io["appendToExisting"] is False and io["dropExisting"] is True
    assert io["inputFormat"] == {"type": "parquet", "binaryAsString": True}
    assert io["inputSource"] == {"type": "local", "files": ["/a/data.parquet"]}
    ds = spec["dataSchema"]
    assert ds["timestampSpec"] == {"column": "__time", "format": "millis"}
    # combining aggregators: count → longSum(count); the others read their own column
    assert ds["metricsSpec"] == [{"type": "longSum", "name": "count", "fieldName": "count"},
                                 {"type": "doubleSum", "name": "price", "fieldName": "price"},
                                 {"type": "doubleMax", "name": "max_price", "fieldName": "max_price"}]
    assert ds["granularitySpec"]["intervals"] == ["2026-01-01T00:00:00.000Z/2026-01-01T02:00:00.000Z"]
    assert ds["granularitySpec"]["rollup"] is True
    assert spec["tuningConfig"]["partitionsSpec"]["type"] == "dynamic"
    assert "awaitSegmentAvailabilityTimeoutMillis" not in spec["tuningConfig"]
    task2 = index_parallel_spec(ads, iv, {"type": "inline", "data": ""}, input_format={"type": "json"},
                                await_segment_availability_ms=5000, task_id="t-1")
    assert task2["id"] == "t-1" and task2["spec"]["ioConfig"]["inputFormat"] == {"type": "json"}
    assert task2["spec"]["tuningConfig"]["awaitSegmentAvailabilityTimeoutMillis"] == 5000


def test_generated_task_is_accepted_by_radstacks_task_parser(ads: Any) -> None:
    from serving.overlord.task_spec import parse_task

    task = index_parallel_spec(ads, Interval(T0, T0 + H), {"type": "local", "files": ["/x/data.parquet"]})
    parsed = parse_task(task, T0)
    assert parsed.append_to_existing is False
    assert parsed.input_format["type"] == "parquet"
    assert parsed.data_schema.metric_names == ("count", "price", "max_price")


def test_visible_segment_files_take_the_newest_complete_version() -> None:
    rt = [seg(T0, T0 + H, "2026-01-01T00:00:00.000Z"), seg(T0 + H, T0 + 2 * H, "2026-01-01T01:00:00.000Z")]
    batch = [seg(T0, T0 + H, "2026-01-02T00:00:00.000Z", 0, 2), seg(T0, T0 + H, "2026-01-02T00:00:00.000Z", 1, 2)]
    incomplete = [seg(T0 + H, T0 + 2 * H, "2026-01-03T00:00:00.000Z", 0, 2)]  # partition 1 missing
    files = visible_segment_files(rt + batch + incomplete, Interval(T0, T0 + 2 * H))
    assert files.storage == "local"
    assert [f.split("/")[-3] for f in files.locations] == [
        "2026-01-02T00:00:00.000Z", "2026-01-02T00:00:00.000Z", "2026-01-01T01:00:00.000Z"]
    # tombstones hide older data and contribute no file
    tomb = DataSegment("ads", Interval(T0 + H, T0 + 2 * H), "2026-01-04T00:00:00.000Z",
                       load_spec={"type": "tombstone"}, shard_spec=ShardSpec("tombstone", 0, 1))
    files = visible_segment_files(rt + batch + [tomb], Interval(T0, T0 + 2 * H))
    assert len(files.locations) == 2
    with pytest.raises(DruidSpecError, match="no segment files"):
        visible_segment_files(rt, Interval(T0 + 5 * H, T0 + 6 * H))


def test_partly_visible_segments_and_mixed_storage_are_refused() -> None:
    day = seg(T0, T0 + 24 * H, "2026-01-01T00:00:00.000Z")
    hour = seg(T0, T0 + H, "2026-01-02T00:00:00.000Z")
    with pytest.raises(DruidSpecError, match="partly visible"):
        visible_segment_files([day, hour], Interval(T0, T0 + 24 * H))
    s3 = seg(T0 + H, T0 + 2 * H, "v", load={"type": "s3", "bucket": "b", "key": "segments/x/data.parquet"})
    with pytest.raises(DruidSpecError, match="several storage types"):
        visible_segment_files([seg(T0, T0 + H, "v"), s3], Interval(T0, T0 + 2 * H))


def test_input_sources_per_storage_type() -> None:
    s3 = seg(T0, T0 + H, "v", load={"type": "s3", "bucket": "deep", "key": "radstack/segments/a/data.parquet"})
    assert input_source_for(visible_segment_files([s3], Interval(T0, T0 + H))) == {
        "type": "s3", "uris": ["s3://deep/radstack/segments/a/data.parquet"]}
    hdfs = seg(T0, T0 + H, "v", load={"type": "hdfs", "path": "hdfs://nn:9000/druid/segments/a/data.parquet"})
    assert input_source_for(visible_segment_files([hdfs], Interval(T0, T0 + H))) == {
        "type": "hdfs", "paths": ["hdfs://nn:9000/druid/segments/a/data.parquet"]}
    bare = seg(T0, T0 + H, "v", load={"type": "hdfs", "path": "/druid/segments/a/data.parquet"})
    files = visible_segment_files([bare], Interval(T0, T0 + H), DeepStorageSettings(hdfs_fs_url="hdfs://nn:8020/"))
    assert files == SegmentFiles("hdfs", ("hdfs://nn:8020/druid/segments/a/data.parquet",))
    with pytest.raises(DruidSpecError, match="hdfs_fs_url"):
        visible_segment_files([bare], Interval(T0, T0 + H), {})


def test_druid_specs_bundle(ads: Any) -> None:
    only_sup = druid_specs(ads, bootstrap_servers="k:1")
    assert set(only_sup) == {"supervisor"}
    both = druid_specs(ads, bootstrap_servers="k:1", interval=Interval(T0 + 10, T0 + 20),
                       segments=[seg(T0, T0 + H, "v")])
    assert both["index_parallel"]["spec"]["dataSchema"]["granularitySpec"]["intervals"] == [
        "2026-01-01T00:00:00.000Z/2026-01-01T01:00:00.000Z"]


# ---- radctl druid specs --------------------------------------------------------------------------


def test_radctl_druid_specs(settings: Settings, radstack_home: Path) -> None:
    import shutil

    from operations.cli import app
    from radstack.storage.metadata import MetadataStore

    (radstack_home / "datasources").mkdir()
    shutil.copy(ADS, radstack_home / "datasources" / "ads.yaml")
    runner = CliRunner()
    env = {"RADSTACK_HOME": str(radstack_home), "RADSTACK_KAFKA__BOOTSTRAP_SERVERS": "broker-a:9092"}
    res = runner.invoke(app, ["druid", "specs", "ads"], env=env)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert set(out) == {"supervisor"}
    assert out["supervisor"]["spec"]["ioConfig"]["consumerProperties"]["bootstrap.servers"] == "broker-a:9092"

    # no segments yet for the interval: a clear error, exit 2
    res = runner.invoke(app, ["druid", "specs", "ads", "-i", "2026-01-01T00/PT2H"], env=env)
    assert res.exit_code == 2 and "no segment files" in res.output

    with MetadataStore.from_settings(settings) as md:
        md.publish([seg(T0, T0 + H, "2026-01-02T00:00:00.000Z"), seg(T0 + H, T0 + 2 * H, "2026-01-02T00:00:00.000Z")])
    res = runner.invoke(app, ["druid", "specs", "ads", "-i", "2026-01-01T00/PT2H", "--only", "index_parallel"], env=env)
    assert res.exit_code == 0, res.output
    task = json.loads(res.stdout)
    assert len(task["spec"]["ioConfig"]["inputSource"]["files"]) == 2
    assert runner.invoke(app, ["druid", "specs", "nope"], env=env).exit_code == 2


# ---- the Overlord client -------------------------------------------------------------------------


class FakeOverlord:
    """Scripted Druid answers: a task that runs twice, then ends as ``final``."""

    def __init__(self, final: str = "SUCCESS") -> None:
        self.final = final
        self.polls = 0
        self.submitted: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "POST" and path == "/druid/indexer/v1/task":
            self.submitted.append(json.loads(request.content))
            return httpx.Response(200, json={"task": "task-1"})
        if request.method == "POST" and path == "/druid/indexer/v1/supervisor":
            return httpx.Response(200, json={"id": json.loads(request.content)["spec"]["dataSchema"]["dataSource"]})
        if path == "/druid/indexer/v1/task/task-1/status":
            self.polls += 1
            st = "RUNNING" if self.polls < 3 else self.final
            body = {"id": "task-1", "status": st, "statusCode": st, "runnerStatusCode": "RUNNING",
                    "duration": -1 if st == "RUNNING" else 1234, "errorMsg": "boom" if st == "FAILED" else None}
            return httpx.Response(200, json={"task": "task-1", "status": body})
        if path == "/druid/indexer/v1/task/missing/status":
            return httpx.Response(404, json={"error": "Cannot find any task with id: [missing]"})
        if path == "/druid/coordinator/v1/loadstatus":
            return httpx.Response(200, json={"ads": 100.0 if self.polls else 50.0})
        return httpx.Response(500, text="unexpected")


def test_overlord_client_submits_and_polls(ads: Any) -> None:
    fake = FakeOverlord()
    seen: list[str] = []
    with OverlordClient("http://druid:8081/", transport=httpx.MockTransport(fake)) as c:
        tid = c.submit_task({"type": "index_parallel", "spec": {}})
        st = c.wait_for_task(tid, poll_s=0.01, on_status=lambda s: seen.append(s.status))
        assert st.ok and st.duration_ms == 1234 and fake.polls == 3
        assert seen == ["RUNNING", "SUCCESS"]
        assert c.submit_supervisor(kafka_supervisor_spec(ads, bootstrap_servers="k:1")) == "ads"
        c.wait_for_load("ads", poll_s=0.01)
        with pytest.raises(DruidApiError) as e:
            c.task_status("missing")
        assert e.value.status_code == 404


def test_overlord_client_failure_and_timeout() -> None:
    failing = OverlordClient("http://druid:8081", transport=httpx.MockTransport(FakeOverlord("FAILED")))
    with failing as c, pytest.raises(TaskFailedError, match="boom"):
        c.wait_for_task("task-1", poll_s=0.01)
    with OverlordClient("http://druid:8081", transport=httpx.MockTransport(FakeOverlord())) as c:
        with pytest.raises(TimeoutError):
            c.wait_for_task("task-1", poll_s=0.01, timeout_s=0.0)
        st = c.wait_for_task("task-1", poll_s=0.01, raise_on_failure=False)
        assert st.status == "SUCCESS"
