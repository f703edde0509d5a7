"""index_dataframe (one Arrow partition at a time through the shared indexer) and handoff."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from radstack.spec import load_datasource_spec
from radstack.time.intervals import Interval, format_instant
from serving.console.timeline_view import segment_kind

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
HOUR = 3_600_000
SPEC = {
    "dataSchema": {
        "dataSource": "ads",
        "timestampSpec": {"column": "timestamp", "format": "iso"},
        "dimensionsSpec": {"dimensions": ["publisher"]},
        "metricsSpec": [{"type": "count", "name": "count"}, {"type": "doubleSum", "name": "price", "fieldName": "price"},
                        {"type": "doubleMax", "name": "max_price", "fieldName": "price"}],
        "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "minute"},
    },
    "processing": {"topics": ["impressions"], "eventId": "impression_id", "windowPeriod": "PT10M"},
}


@pytest.fixture
def env(tmp_path: Path) -> Any:
    from radstack.storage.deep_storage import open_deep_storage
    from radstack.storage.metadata import MetadataStore

    md = MetadataStore.from_url(f"sqlite:///{tmp_path / 'md.db'}")
    md.create_tables()
    cfg = {"type": "local", "path": str(tmp_path / "deep")}
    yield md, open_deep_storage(cfg), cfg
    md.close()


def _rows(table: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(table, schema=pa.schema([("__time", pa.int64()), ("publisher", pa.string()),
                                                         ("price", pa.float64())]))


def test_index_dataframe_versions_by_interval_start_and_numbers_partitions(stream_spark: Any, env: Any) -> None:
    from radstack.pipeline.indexing import index_dataframe

    _, _, cfg = env
    spec = load_datasource_spec(SPEC)
    rows = [(T0 + i * 60_000, f"p{i % 3}", 1.0) for i in range(90)]  # 90 minutes: two hours
    df = stream_spark.createDataFrame(rows, "__time bigint, publisher string, price double").repartition(2)
    iv0 = Interval(T0, T0 + HOUR)
    res = index_dataframe(df, spec.data_schema, deep_storage_config=cfg,
                          base_offsets={(iv0, format_instant(T0)): 5})
    assert res.stats.processed == 90
    by_iv: dict[Interval, list[Any]] = {}
    for s in res.segments:
        by_iv.setdefault(s.interval, []).append(s)
        assert s.version == format_instant(s.interval.start)
        assert s.shard_spec.type == "numbered" and s.shard_spec.partitions == 0
    assert sorted(by_iv) == [iv0, Interval(T0 + HOUR, T0 + 2 * HOUR)]
    assert sorted(s.partition_num for s in by_iv[iv0]) == [5, 6]  # base + Spark partition id
    assert sum(pq.read_table(s.load_spec["path"]).column("count").to_numpy().sum() for s in res.segments) == 90


def _publish_realtime(md: Any, ds: Any, spec: Any, batches: list[list[dict[str, Any]]], replica: int = 0) -> list[Any]:
    from radstack.pipeline.indexing import index_table
    from radstack.storage.publish import publish
    from radstack.storage.replicas import partition_range

    out = []
    for n, b in enumerate(batches):
        res = index_table(_rows(b), spec.data_schema, deep_storage=ds, first_partition=partition_range(replica)[0],
                          base_offsets={(Interval(T0, T0 + HOUR), format_instant(T0)): n})
        publish(md, ds, res.segments)
        out += res.segments
    return out


def test_handoff_merges_partitions_with_combining_aggregators(env: Any) -> None:
    from radstack.storage.timeline import VersionedIntervalTimeline
    from realtime.streaming.handoff import handoff_closed_intervals, handoff_version

    md, ds, _ = env
    spec = load_datasource_spec(SPEC)
    small = _publish_realtime(md, ds, spec, [
        [{"__time": T0 + 1000, "publisher": "a", "price": 1.0}, {"__time": T0 + 2000, "publisher": "b", "price": 2.0}],
        [{"__time": T0 + 3000, "publisher": "a", "price": 5.0}],
        [{"__time": T0 + 61_000, "publisher": "a", "price": 0.5}],
    ])
    assert len(small) == 3
    iv = Interval(T0, T0 + HOUR)
    # not closed yet: end + windowPeriod is after the watermark
    assert handoff_closed_intervals(md, ds, spec, watermark_ms=T0 + HOUR + 599_999, window_ms=600_000) == []
    assert handoff_closed_intervals(md, ds, spec, watermark_ms=T0 + HOUR + 600_000, window_ms=600_000) == [iv]
    [merged] = md.segments("ads")
    assert merged.version == handoff_version(iv) and merged.shard_spec.partitions == 1
    # the timeline API and console tell it from a batch set by its marker (#51)
    assert merged.last_compaction_state == {"type": "handoff", "partitionsMerged": 3}
    assert segment_kind(merged) == "handed-off"
    assert {s.identifier for s in md.segments("ads", used=False)} == {s.identifier for s in small}
    rows = pq.read_table(merged.load_spec["path"]).to_pylist()
    got = {(r["__time"].timestamp() * 1000, r["publisher"]): (r["count"], r["price"], r["max_price"]) for r in rows}
    assert got == {
        (T0, "a"): (2, 6.0, 5.0),  # rolled up across two real-time partitions: count summed
        (T0, "b"): (1, 2.0, 2.0),
        (T0 + 60_000, "a"): (1, 0.5, 0.5),
    }
    tl = VersionedIntervalTimeline.from_segments(md.segments("ads"))
    assert [h.version for h in tl.lookup(iv)] == [handoff_version(iv)]


def test_handoff_with_replicas_merges_its_own_copy_and_retires_all(env: Any) -> None:
    """Two replicas' copies of the same events: the handing-off replica merges only its own copy (no
    double count) and both copies are marked unused with the merge."""
    from realtime.streaming.handoff import handoff_closed_intervals

    md, ds, _ = env
    spec = load_datasource_spec(SPEC)
    events = [{"__time": T0 + 1000, "publisher": "a", "price": 1.0}, {"__time": T0 + 2000, "publisher": "a", "price": 2.0}]
    copy0 = _publish_realtime(md, ds, spec, [events[:1], events[1:]])
    copy1 = _publish_realtime(md, ds, spec, [events], replica=1)
    assert handoff_closed_intervals(md, ds, spec, watermark_ms=T0 + 2 * HOUR, window_ms=600_000, replica=1) == [
        Interval(T0, T0 + HOUR)]
    [merged] = md.segments("ads")
    assert [r["count"] for r in pq.read_table(merged.load_spec["path"]).to_pylist()] == [2]
    assert {s.identifier for s in md.segments("ads", used=False)} == {s.identifier for s in copy0 + copy1}


def test_handoff_never_overrides_a_batch_version(env: Any) -> None:
    from radstack.storage.publish import publish
    from realtime.streaming.handoff import handoff_closed_intervals

    md, ds, _ = env
    spec = load_datasource_spec(SPEC)
    small = _publish_realtime(md, ds, spec, [[{"__time": T0 + 1000, "publisher": "a", "price": 1.0}]])
    batch = replace(small[0], version="2026-01-01T02:00:00.000Z")
    publish(md, ds, [batch])
    assert handoff_closed_intervals(md, ds, spec, watermark_ms=T0 + 5 * HOUR, window_ms=600_000) == []
    assert {s.version for s in md.segments("ads")} == {small[0].version, batch.version}


def test_version_ordering_realtime_handoff_batch() -> None:
    from realtime.streaming.handoff import handoff_version

    iv = Interval(T0, T0 + HOUR)
    rt = format_instant(T0)
    batch_versions = [format_instant(T0 + HOUR), format_instant(T0 + 1), "2026-01-01T00:00:00.001Z", "2027-01-01T00:00:00.000Z"]
    for b in batch_versions:
        assert rt < handoff_version(iv) < b


def test_progress_tracker_counts_each_batch_once_and_computes_lag() -> None:
    from realtime.streaming.progress import ProgressTracker, status_view

    def prog(bid: int, dup: int, late: int) -> dict[str, Any]:
        return {
            "id": "q", "runId": "r1", "batchId": bid, "inputRowsPerSecond": 10.0, "processedRowsPerSecond": 20.0,
            "durationMs": {"addBatch": 700, "triggerExecution": 800},  # an executed batch (idle triggers have no addBatch)
            "stateOperators": [{"numRowsDroppedByWatermark": late, "customMetrics": {"numDroppedDuplicateRows": dup}}],
            "sources": [{"endOffset": {"t": {"0": 10, "1": 5}}, "latestOffset": {"t": {"0": 15, "1": 5}}}],
        }

    t = ProgressTracker.resume({"duplicatesDropped": 3, "droppedByWatermark": 1})
    assert t.update([prog(0, 2, 1), prog(1, 1, 0)])
    assert not t.update([prog(0, 2, 1), prog(1, 1, 0)])
    st = t.state()
    assert (st["duplicatesDropped"], st["droppedByWatermark"], st["lag"], st["batchDurationMs"]) == (6, 2, 5, 800)
    view = status_view({"counters": {"thrownAway": 4, "processed": 9}, "lastBatchId": 1}, st)
    assert view["thrownAway"] == 6 and view["processed"] == 9 and view["duplicatesDropped"] == 6


def test_committed_offsets_follow_spark_when_the_last_records_were_dropped() -> None:
    from realtime.streaming.progress import committed_offsets, status_view

    sink = {"ads": {"0": 40, "1": 12}}  # the last kept rows of the sink
    end = {"ads": {"0": 50, "1": 12, "2": 3}}  # where Spark's committed batch ended (late rows dropped)
    assert committed_offsets(sink, end) == {"ads": {"0": 50, "1": 12, "2": 3}}
    assert committed_offsets(sink, None) == sink and committed_offsets(None, None) == {}
    view = status_view({"offsets": sink, "lastBatchId": 3}, {"endOffsets": end})
    assert view["committedOffsets"]["ads"]["0"] == 50
