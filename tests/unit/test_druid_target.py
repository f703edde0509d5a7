"""The pieces of the Druid serving target that need no Druid (radstack/druid_cluster/): the JSON lines a
stock Druid re-indexes from, the settings of docs/druid-cluster.md, the compaction config Druid gets, the
processed topic a Druid-served datasource writes, corrections measured against Druid, and the re-indexes
left to retry. The loop against a real Druid 33 is tests/integration/test_druid_lambda_loop.py."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml

from radstack.config import Settings, load_settings
from radstack.druid_cluster import reindex as reindex_mod
from radstack.druid_cluster.json_export import JSON_FILE, ensure_json_lines, json_key, write_json_lines
from radstack.druid_cluster.specs import processed_topic, with_processed_topic
from radstack.druid_cluster.sync import druid_compaction_config
from radstack.spec import load_datasource_spec
from radstack.storage.compaction.config import CompactionConfig
from radstack.storage.deep_storage.local import LocalDeepStorage
from radstack.storage.metadata import MetadataStore
from radstack.storage.metadata.tables import CorrectionRow
from radstack.storage.segment_format import segment_data_key
from radstack.time.intervals import Interval, parse_instant
from tests.fixtures.broker import index_and_publish

ROOT = Path(__file__).resolve().parents[2]
SCHEMA: dict[str, Any] = {
    "dataSource": "ads",
    "timestampSpec": {"column": "ts", "format": "millis"},
    "dimensionsSpec": {"dimensions": ["publisher", {"type": "string", "name": "tags", "multiValueHandling": "ARRAY"}]},
    "metricsSpec": [{"type": "count", "name": "count"}, {"type": "doubleSum", "name": "price", "fieldName": "price"},
                    {"type": "HLLSketchBuild", "name": "users", "fieldName": "user"}],
    "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "minute", "rollup": True},
}
T0 = parse_instant("2026-11-20T10:00:00Z")


def _table() -> pa.Table:
    return pa.table({"ts": [T0 + 1000, T0 + 61_000, T0 + 62_000], "publisher": ["a", None, "b"],
                     "tags": [["x", "y"], None, ["z"]], "price": [1.5, 2.0, 0.25], "user": ["u1", "u2", "u3"]})


def test_each_segment_gets_gzip_json_lines_druid_reads(tmp_path: Path) -> None:
    storage = LocalDeepStorage(tmp_path / "deep")
    with MetadataStore.from_url(f"sqlite:///{tmp_path / 'md.db'}") as md:
        md.create_tables()
        segments = index_and_publish(md, storage, _table(), SCHEMA)
    assert write_json_lines(storage, segments) == len(segments) == 1
    key = json_key(segment_data_key(segments[0].id))
    assert key.endswith("/" + JSON_FILE) and storage.exists(key)
    rows = [json.loads(line) for line in gzip.decompress((tmp_path / "deep" / key).read_bytes()).splitlines()]
    assert [r["__time"] for r in rows] == [T0, T0 + 60_000, T0 + 60_000]  # rolled up to minutes, in millis
    assert {r["publisher"] for r in rows} == {"a", None, "b"}
    assert [r for r in rows if r["publisher"] == "a"][0]["tags"] == ["x", "y"]
    assert sum(r["count"] for r in rows) == 3 and sum(r["price"] for r in rows) == 3.75
    assert all(re.fullmatch(r"[A-Za-z0-9+/]+=*", r["users"]) for r in rows)  # sketches in base64
    # a second look writes nothing new: the files are there
    assert ensure_json_lines(storage, segments) == 0
    (tmp_path / "deep" / key).unlink()
    assert ensure_json_lines(storage, segments) == 1


def test_the_settings_of_the_docs_run_as_written() -> None:
    doc = (ROOT / "docs" / "druid-cluster.md").read_text()
    block = re.search(r"```yaml\n(druid:.*?)```", doc, re.S)
    assert block is not None
    settings = load_settings(env={}, overrides=yaml.safe_load(block.group(1)))
    d = settings.druid
    assert d.serves("ads") and not d.serves("wiki") and d.parquet_input
    assert d.coordinator == "http://druid-coordinator:8081" and d.broker == "http://druid-broker:8082"
    assert not Settings().druid.serves("ads")  # off by default


def test_druid_gets_one_compaction_granularity_and_no_radstack_tiers() -> None:
    raw = {"dataSource": "ads", "skipOffsetFromLatest": "PT2H",
           "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "hour"},
           "tiers": [{"olderThan": "P30D", "segmentGranularity": "month", "queryGranularity": "day"}]}
    config = CompactionConfig.from_json(raw)
    first = config.tiers[0]
    out = druid_compaction_config(config.to_json(), first.granularity_json(True))
    assert "tiers" not in out and out["skipOffsetFromLatest"] == "PT2H"
    assert out["granularitySpec"] == {"type": "uniform", "segmentGranularity": "DAY", "queryGranularity": "HOUR",
                                      "rollup": True}


def test_a_druid_served_datasource_writes_its_processed_topic() -> None:
    spec = load_datasource_spec({"dataSchema": {**SCHEMA, "dataSource": "ads"},
                                 "processing": {"topics": ["impressions"], "eventId": "id"}})
    served = Settings(druid={"overlord_url": "http://druid:8090", "datasources": ["ads"]}).druid
    assert with_processed_topic(spec, Settings().druid).processing.processed_topic is None
    assert with_processed_topic(spec, served).processing.processed_topic == "ads-processed" == processed_topic(spec)
    named = load_datasource_spec({"dataSchema": SCHEMA, "processing": {
        "topics": ["impressions"], "processedTopic": "mine"}})
    assert with_processed_topic(named, served).processing.processed_topic == "mine"


def test_corrections_against_druid_are_kept_apart(tmp_path: Path) -> None:
    with MetadataStore.from_url(f"sqlite:///{tmp_path / 'md.db'}") as md:
        md.create_tables()
        md.record_corrections([CorrectionRow("ads", T0, T0 + 3_600_000, "v2", "v1", 600, 640, {"price": 1.0},
                                             {"price": 2.0}, served_by="druid")])
        (row,) = md.corrections("ads")
    assert row.served_by == "druid" and row.event_gap == 40 and row.late_recovered == 40


def test_failed_reindexes_are_remembered_until_one_succeeds(tmp_path: Path) -> None:
    day = Interval(T0, T0 + 24 * 3_600_000)
    hour = Interval(T0, T0 + 3_600_000)
    with MetadataStore.from_url(f"sqlite:///{tmp_path / 'md.db'}") as md:
        md.create_tables()
        reindex_mod._set_pending(md, "ads", hour, pending=True)
        reindex_mod._set_pending(md, "ads", Interval(T0 + 3_600_000, T0 + 7_200_000), pending=True)
        assert [iv.iso() for iv in reindex_mod.pending_reindexes(md)["ads"]] == [
            hour.iso(), Interval(T0 + 3_600_000, T0 + 7_200_000).iso()]
        reindex_mod._set_pending(md, "ads", day, pending=False)  # a later re-index covering both
        assert reindex_mod.pending_reindexes(md) == {}
        # a datasource Druid no longer serves: forgotten, not retried
        reindex_mod._set_pending(md, "gone", hour, pending=True)
        settings = Settings(druid={"overlord_url": "http://127.0.0.1:9", "datasources": ["ads"]})
        assert reindex_mod.retry_pending(settings, md, LocalDeepStorage(tmp_path / "deep"), {}) == []
        assert reindex_mod.pending_reindexes(md) == {}


def test_a_reindex_task_id_is_fixed_by_datasource_chunks_and_version() -> None:
    spec = load_datasource_spec({"dataSchema": SCHEMA, "processing": {"topics": ["impressions"]}})
    chunks = Interval(T0, T0 + 3_600_000)
    first = reindex_mod._task_id(spec, chunks, "2026-11-20T11:05:00.000Z", 1)
    assert first == reindex_mod._task_id(spec, chunks, "2026-11-20T11:05:00.000Z", 1)
    assert first != reindex_mod._task_id(spec, chunks, "2026-11-20T11:06:00.000Z", 1)
    assert reindex_mod._task_id(spec, chunks, "2026-11-20T11:05:00.000Z", 2) == first + "_try2"
    assert re.fullmatch(r"[A-Za-z0-9_.:-]+", first)  # Druid's task id rules: no '/', no spaces


def test_a_druid_that_does_not_answer_fails_the_step_never_the_rebuild(tmp_path: Path) -> None:
    """Druid down: the re-index raises DruidReindexError, its task record ends FAILED (not RUNNING) with the
    reason, and the interval is remembered for the server's druid_sync duty to retry."""
    from operations.processes import free_port

    settings = load_settings(env={"RADSTACK_HOME": str(tmp_path / "home")}, overrides={"druid": {
        "overlord_url": f"http://127.0.0.1:{free_port()}", "datasources": ["ads"], "timeout_seconds": 2,
        "reindex_timeout_seconds": 3}})
    spec = load_datasource_spec({"dataSchema": SCHEMA, "processing": {"topics": ["impressions"]}})
    storage = LocalDeepStorage(tmp_path / "deep")
    hour = Interval(T0, T0 + 3_600_000)
    with MetadataStore.from_url(f"sqlite:///{tmp_path / 'md.db'}") as md:
        md.create_tables()
        index_and_publish(md, storage, _table(), SCHEMA)
        try:
            reindex_mod.reindex(settings, md, storage, spec, hour, started_by="test")
        except reindex_mod.DruidReindexError as e:
            assert "ads" in str(e)
        else:
            raise AssertionError("a Druid that does not answer must fail the step")
        (task,) = [t for t in md.list_tasks(datasource="ads") if t.type == reindex_mod.TASK_TYPE]
        assert task.status == "FAILED" and task.error_msg and task.payload["startedBy"] == "test"
        assert [iv.iso() for iv in reindex_mod.pending_reindexes(md)["ads"]] == [hour.iso()]
