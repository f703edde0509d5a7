from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pytest

from radstack.spec import DataSchema, parse_data_schema
from radstack.storage.indexer import (
    IngestStats,
    build_segment_tables,
    index_partition,
    renumber_core,
)
from radstack.storage.segment_format import (
    read_segment_table,
    segment_data_key,
    segment_descriptor_key,
    segment_schema,
)
from radstack.storage.segments import DataSegment, ShardSpec
from radstack.time.floor import floor_millis
from radstack.time.granularity import Granularity
from radstack.time.intervals import Interval, format_instant, parse_instant

VERSION = "2024-01-01T00:00:00.000Z"


def ms(text: str) -> int:
    return parse_instant(text)


def schema(**over: Any) -> DataSchema:
    ds: dict[str, Any] = {
        "dataSource": "events",
        "timestampSpec": {"column": "ts", "format": "iso"},
        "dimensionsSpec": {"dimensions": ["country", {"type": "long", "name": "code"}]},
        "metricsSpec": [
            {"type": "count", "name": "count"},
            {"type": "longSum", "name": "clicks", "fieldName": "clicks"},
            {"type": "doubleSum", "name": "revenue", "fieldName": "revenue"},
            {"type": "longMin", "name": "minClicks", "fieldName": "clicks"},
            {"type": "doubleMax", "name": "maxRevenue", "fieldName": "revenue"},
            {"type": "floatSum", "name": "weight", "fieldName": "w"},
        ],
        "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "hour", "rollup": True},
    }
    for k, v in over.items():
        ds[k] = v
    return parse_data_schema(ds)


def events() -> pa.Table:
    return pa.table(
        {
            "ts": [
                "2024-01-01T10:05:00Z",
                "2024-01-01T10:45:00Z",
                "2024-01-01T10:50:00Z",
                "2024-01-01T11:00:00Z",
                "2024-01-02T00:30:00Z",
                "2024-01-01T10:59:59.999Z",
            ],
            "country": ["DE", "DE", "FR", "DE", "DE", None],
            "code": [1, 1, 2, 1, 1, None],
            "clicks": [3, 4, 10, 1, 7, 2],
            "revenue": [0.5, 1.25, 2.0, 0.0, 3.0, 1.0],
            "w": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            "ignored": ["a", "b", "c", "d", "e", "f"],
        }
    )


def rows(pieces: list) -> list[dict[str, Any]]:  # type: ignore[type-arg]
    out = []
    for p in pieces:
        for r in p.table.to_pylist():
            r["__time"] = format_instant(int(pa.scalar(r["__time"], pa.timestamp("ms")).cast(pa.int64()).as_py()))
            out.append(r)
    return out


# ---- rollup, truncation, splitting ----------------------------------------------------------------


def test_rollup_combines_metrics_and_truncates_to_query_granularity() -> None:
    pieces, dims, stats = build_segment_tables(events(), schema())
    assert [d.name for d in dims] == ["country", "code"]
    assert [(p.interval, p.index, p.count) for p in pieces] == [
        (Interval(ms("2024-01-01"), ms("2024-01-02")), 0, 1),
        (Interval(ms("2024-01-02"), ms("2024-01-03")), 0, 1),
    ]
    got = rows(pieces)
    assert got == [
        # nulls sort first within a timestamp; a null dimension is its own group
        {"__time": "2024-01-01T10:00:00.000Z", "country": None, "code": None, "count": 1, "clicks": 2,
         "revenue": 1.0, "minClicks": 2, "maxRevenue": 1.0, "weight": 6.0},
        {"__time": "2024-01-01T10:00:00.000Z", "country": "DE", "code": 1, "count": 2, "clicks": 7,
         "revenue": 1.75, "minClicks": 3, "maxRevenue": 1.25, "weight": 3.0},
        {"__time": "2024-01-01T10:00:00.000Z", "country": "FR", "code": 2, "count": 1, "clicks": 10,
         "revenue": 2.0, "minClicks": 10, "maxRevenue": 2.0, "weight": 3.0},
        {"__time": "2024-01-01T11:00:00.000Z", "country": "DE", "code": 1, "count": 1, "clicks": 1,
         "revenue": 0.0, "minClicks": 1, "maxRevenue": 0.0, "weight": 4.0},
        {"__time": "2024-01-02T00:00:00.000Z", "country": "DE", "code": 1, "count": 1, "clicks": 7,
         "revenue": 3.0, "minClicks": 7, "maxRevenue": 3.0, "weight": 5.0},
    ]
    assert stats.processed == 6 and stats.unparseable == 0 and stats.thrown_away == 0
    for p in pieces:
        assert p.table.schema == segment_schema(schema())


def test_segment_schema_types() -> None:
    s = segment_schema(schema())
    assert s.names == ["__time", "country", "code", "count", "clicks", "revenue", "minClicks", "maxRevenue", "weight"]
    assert s.field("__time").type == pa.timestamp("ms")
    assert [s.field(n).type for n in s.names[1:]] == [
        pa.string(), pa.int64(), pa.int64(), pa.int64(), pa.float64(), pa.int64(), pa.float64(), pa.float32()
    ]


def test_no_rollup_keeps_every_row_with_count_one() -> None:
    gs = {"segmentGranularity": "day", "queryGranularity": "hour", "rollup": False}
    pieces, _, stats = build_segment_tables(events(), schema(granularitySpec=gs))
    got = rows(pieces)
    assert len(got) == 6 and stats.processed == 6
    assert {r["count"] for r in got} == {1}
    de10 = [r for r in got if r["country"] == "DE" and r["__time"] == "2024-01-01T10:00:00.000Z"]
    assert sorted(r["clicks"] for r in de10) == [3, 4]
    # still sorted by __time then dimensions
    keys = [(r["__time"], r["country"] or "", r["code"] or -1) for r in got]
    assert keys == sorted(keys)


@pytest.mark.parametrize(
    ("seg", "expected"),
    [
        ("day", [("2024-01-01T00:00:00.000Z", 3), ("2024-01-02T00:00:00.000Z", 1)]),
        ("hour", [("2024-01-01T10:00:00.000Z", 2), ("2024-01-01T11:00:00.000Z", 1), ("2024-01-02T00:00:00.000Z", 1)]),
        ("month", [("2024-01-01T00:00:00.000Z", 4)]),
        ("all", [("-146136543-09-08T08:23:32.096Z", 4)]),
    ],
)
def test_split_by_segment_granularity(seg: str, expected: list[tuple[str, int]]) -> None:
    gs = {"segmentGranularity": seg, "queryGranularity": "minute"}
    data = pa.table(
        {
            "ts": ["2024-01-01T10:05:00Z", "2024-01-01T10:06:00Z", "2024-01-01T11:00:00Z", "2024-01-02T00:30:00Z"],
            "country": ["A", "B", "A", "A"],
        }
    )
    s = schema(granularitySpec=gs, metricsSpec=[{"type": "count", "name": "count"}])
    pieces, _, _ = build_segment_tables(data, s)
    assert [(format_instant(p.interval.start), p.table.num_rows) for p in pieces] == expected
    for p in pieces:
        assert p.interval == (Interval.eternity() if seg == "all" else Granularity.parse(seg).bucket(p.interval.start))
        t = p.table.column("__time").cast(pa.int64()).to_pylist()
        assert all(p.interval.contains_instant(x) for x in t)


def test_max_rows_per_segment_partitions_each_interval() -> None:
    n = 10
    data = pa.table({"ts": [f"2024-01-01T00:{i:02d}:00Z" for i in range(n)] + ["2024-01-02T00:00:00Z"],
                     "country": [f"c{i}" for i in range(n + 1)]})
    s = schema(metricsSpec=[{"type": "count", "name": "count"}],
               granularitySpec={"segmentGranularity": "day", "queryGranularity": "none"})
    pieces, _, _ = build_segment_tables(data, s, max_rows_per_segment=3)
    assert [(p.interval.start, p.index, p.count, p.table.num_rows) for p in pieces] == [
        (ms("2024-01-01"), 0, 4, 3), (ms("2024-01-01"), 1, 4, 3), (ms("2024-01-01"), 2, 4, 3),
        (ms("2024-01-01"), 3, 4, 1), (ms("2024-01-02"), 0, 1, 1),
    ]
    # pieces continue the sort order
    names = [r["country"] for p in pieces for r in p.table.to_pylist()]
    assert names == [f"c{i}" for i in range(n + 1)]


def test_week_segments_and_interval_widening() -> None:
    # Druid keeps rows inside the segment-granularity buckets that overlap the intervals:
    # 2018-01-01/2018-01-03 with WEEK segments accepts the whole week of Monday 2018-01-01.
    s = schema(
        metricsSpec=[{"type": "count", "name": "count"}],
        granularitySpec={"segmentGranularity": "week", "queryGranularity": "day", "intervals": ["2018-01-01/2018-01-03"]},
    )
    data = pa.table({"ts": ["2018-01-01T05:00:00Z", "2018-01-07T23:59:59Z", "2018-01-08T00:00:00Z",
                            "2017-12-31T23:59:59Z"], "country": ["a", "b", "c", "d"]})
    pieces, _, stats = build_segment_tables(data, s)
    assert stats.thrown_away == 2 and stats.processed == 2 and stats.filtered == 0
    assert [p.interval for p in pieces] == [Interval(ms("2018-01-01"), ms("2018-01-08"))]
    assert [r["country"] for r in rows(pieces)] == ["a", "b"]


def test_rows_outside_day_intervals_are_thrown_away() -> None:
    gs = {"segmentGranularity": "hour", "queryGranularity": "none", "intervals": ["2024-01-01T10:00/2024-01-01T11:00"]}
    _, _, stats = build_segment_tables(events(), schema(granularitySpec=gs))
    assert (stats.processed, stats.thrown_away) == (4, 2)


def test_unparseable_rows_are_counted_and_sampled() -> None:
    data = pa.table({"ts": ["2024-01-01T00:00:00Z", "yesterday", None, "2024-01-01T01:00:00Z"],
                     "country": ["a", "b", "c", "d"], "clicks": [1, 2, 3, 4]})
    pieces, _, stats = build_segment_tables(data, schema(), max_samples=1)
    assert stats.unparseable == 2 and stats.processed == 2
    assert [(s["input"], s["errorType"], s["details"]) for s in stats.samples] == [
        ('{"ts":"yesterday","country":"b","clicks":2}', "unparseable", ["Timestamp[yesterday] is unparseable!"])
    ]
    assert [r["country"] for r in rows(pieces)] == ["a", "d"]
    assert stats.row_stats() == {
        "processed": 2, "processedBytes": data.nbytes, "processedWithError": 0, "thrownAway": 0, "unparseable": 2,
    }
    assert stats.filtered == 0


def test_missing_timestamp_column_uses_missing_value() -> None:
    s = schema(timestampSpec={"column": "nope", "missingValue": "2020-05-05T05:05:05Z"})
    pieces, _, stats = build_segment_tables(events(), s)
    assert stats.unparseable == 0
    assert {r["__time"] for r in rows(pieces)} == {"2020-05-05T05:00:00.000Z"}
    s2 = schema(timestampSpec={"column": "nope"})
    pieces2, _, stats2 = build_segment_tables(events(), s2)
    assert pieces2 == [] and stats2.unparseable == 6
    assert stats2.samples[0]["details"] == ["Timestamp[null] is unparseable!"]


def test_numeric_conversion_and_processed_with_error() -> None:
    data = pa.table({"ts": ["2024-01-01T00:00:00Z"] * 4, "country": ["a", "b", "c", "d"],
                     "code": ["12.7", "-3", "x", None], "clicks": ["5", "oops", "2.9", None]})
    s = schema(metricsSpec=[{"type": "longSum", "name": "clicks", "fieldName": "clicks"}],
               granularitySpec={"rollup": False})
    pieces, _, stats = build_segment_tables(data, s)
    got = [(r["country"], r["code"], r["clicks"]) for r in rows(pieces)]
    assert got == [("a", 12, 5), ("b", -3, None), ("c", None, 2), ("d", None, None)]
    assert stats.processed_with_error == 2 and stats.processed == 4


def test_missing_columns_become_nulls() -> None:
    data = pa.table({"ts": ["2024-01-01T00:00:00Z", "2024-01-01T00:10:00Z"]})
    pieces, _, _ = build_segment_tables(data, schema())
    (r,) = rows(pieces)
    assert r["country"] is None and r["code"] is None and r["count"] == 2 and r["clicks"] is None


def test_schemaless_dimensions_are_discovered_sorted() -> None:
    s = parse_data_schema({"dataSource": "x", "timestampSpec": {"column": "ts"},
                           "metricsSpec": [{"type": "longSum", "name": "sum_clicks", "fieldName": "clicks"}],
                           "dimensionsSpec": {"dimensionExclusions": ["ignored"]}})
    pieces, dims, _ = build_segment_tables(events(), s)
    assert [d.name for d in dims] == ["code", "country", "revenue", "w"]
    assert pieces[0].table.schema.names == ["__time", "code", "country", "revenue", "w", "sum_clicks"]
    assert pieces[0].table.schema.field("code").type == pa.string()
    assert rows(pieces)[0]["code"] == "1"


def test_input_as_record_batches_and_empty_input() -> None:
    t = events()
    pieces, _, stats = build_segment_tables(t.to_batches(max_chunksize=2), schema())
    assert rows(pieces) == rows(build_segment_tables(t, schema())[0])
    assert stats.processed == 6
    pieces, _, stats = build_segment_tables([], schema())
    assert pieces == [] and stats.processed == 0


def test_existing_time_column_is_replaced_by_the_parsed_timestamp() -> None:
    data = events().append_column("__time", pa.array([0] * 6, pa.int64()))
    got = rows(build_segment_tables(data, schema())[0])
    assert got[0]["__time"] == "2024-01-01T10:00:00.000Z"


def test_numeric_input_timestamps_reindexing_a_segment() -> None:
    # Re-indexing segment rows: __time as timestamp[ms], format millis.
    first = build_segment_tables(events(), schema())[0]
    table = pa.concat_tables([p.table for p in first])
    s = schema(timestampSpec={"column": "__time", "format": "millis"},
               metricsSpec=[{"type": "longSum", "name": "count", "fieldName": "count"},
                            {"type": "longSum", "name": "clicks", "fieldName": "clicks"}],
               granularitySpec={"segmentGranularity": "month", "queryGranularity": "day"})
    again = rows(build_segment_tables(table, s)[0])
    assert [(r["__time"], r["country"], r["count"], r["clicks"]) for r in again] == [
        ("2024-01-01T00:00:00.000Z", None, 1, 2),
        ("2024-01-01T00:00:00.000Z", "DE", 3, 8),
        ("2024-01-01T00:00:00.000Z", "FR", 1, 10),
        ("2024-01-02T00:00:00.000Z", "DE", 1, 7),
    ]


# ---- bucketing ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "gran",
    [
        "minute", "fifteen_minute", "hour", "six_hour", "day", "week", "month", "quarter", "year", "PT7M",
        {"type": "period", "period": "P1D", "timeZone": "America/Los_Angeles"},
        {"type": "period", "period": "PT1H", "timeZone": "Asia/Kolkata"},
        {"type": "period", "period": "PT1H", "origin": "2000-01-01T00:30:00Z"},
        {"type": "duration", "duration": 7_000, "origin": "1999-12-31T23:59:58Z"},
    ],
)
def test_bucket_starts_matches_granularity(gran: Any) -> None:
    g = Granularity.parse(gran)
    rnd = random.Random(7)
    vals = np.array([rnd.randrange(ms("1968-01-01"), ms("2030-01-01")) for _ in range(400)]
                    + [rnd.randrange(ms("2024-03-09"), ms("2024-03-12")) for _ in range(400)], dtype=np.int64)
    expected = [g.bucket_start(int(v)) for v in vals]
    assert floor_millis(vals, g).tolist() == expected


# ---- writing: index_partition ----------------------------------------------------------------------


def test_index_partition_writes_core_sets(indexer_deep_storage: Any) -> None:
    data = pa.table({"ts": [f"2024-01-01T{h:02d}:00:00Z" for h in range(5)] + ["2024-01-02T00:00:00Z"],
                     "country": list("abcdef")})
    s = schema(metricsSpec=[{"type": "count", "name": "count"}])
    res = index_partition(data, s, version=VERSION, deep_storage=indexer_deep_storage, max_rows_per_segment=2)
    segs = res.segments
    assert [(format_instant(x.interval.start), x.shard_spec.partition_num, x.shard_spec.partitions, x.num_rows)
            for x in segs] == [
        ("2024-01-01T00:00:00.000Z", 0, 3, 2), ("2024-01-01T00:00:00.000Z", 1, 3, 2),
        ("2024-01-01T00:00:00.000Z", 2, 3, 1), ("2024-01-02T00:00:00.000Z", 0, 1, 1),
    ]
    assert res.stats.processed == 6 and res.num_rows == 6
    for seg in segs:
        assert seg.version == VERSION and seg.data_source == "events"
        assert seg.dimensions == ("country", "code") and seg.metrics == ("count",)
        assert seg.shard_spec.type == "numbered"
        assert seg.load_spec, "loadSpec filled"
        key = segment_data_key(seg.id)
        assert key == f"segments/events/{format_instant(seg.interval.start)}_{format_instant(seg.interval.end)}" \
                      f"/{VERSION}/{seg.partition_num}/data.parquet".replace(":", "_")
        assert indexer_deep_storage.exists(key)
        local = Path(indexer_deep_storage.root) / key if hasattr(indexer_deep_storage, "root") else None
        blob = indexer_deep_storage.get_bytes(key)
        assert seg.size == len(blob)
        if local is not None:
            table = read_segment_table(local)
            assert table.num_rows == seg.num_rows
            assert table.schema == segment_schema(s)
    assert not indexer_deep_storage.exists(segment_descriptor_key(segs[0].id)), "not published yet"


def test_index_partition_append_shard_specs(indexer_deep_storage: Any) -> None:
    data = pa.table({"ts": ["2024-01-01T00:00:00Z", "2024-01-01T01:00:00Z", "2024-01-02T00:00:00Z"],
                     "country": ["a", "b", "c"]})
    s = schema(metricsSpec=[{"type": "count", "name": "count"}])
    day1 = Interval(ms("2024-01-01"), ms("2024-01-02"))
    res = index_partition(data, s, version=VERSION, deep_storage=indexer_deep_storage, shard="append",
                          partition_offset={day1: 5}, max_rows_per_segment=1)
    assert [(x.interval.start, x.shard_spec) for x in res.segments] == [
        (ms("2024-01-01"), ShardSpec("numbered", 5, 0)),
        (ms("2024-01-01"), ShardSpec("numbered", 6, 0)),
        (ms("2024-01-02"), ShardSpec("numbered", 0, 0)),
    ]
    assert res.segments[0].identifier.endswith("_5")
    assert indexer_deep_storage.exists(segment_data_key(res.segments[1].id))


def test_index_partition_rejects_unknown_shard(indexer_deep_storage: Any) -> None:
    with pytest.raises(ValueError, match="shard"):
        index_partition(events(), schema(), version=VERSION, deep_storage=indexer_deep_storage,
                        shard="hashed")  # type: ignore[arg-type]


def test_renumber_core_merges_partitions_of_one_job(indexer_deep_storage: Any) -> None:
    t = events()
    s = schema()
    day1 = Interval(ms("2024-01-01"), ms("2024-01-02"))
    day2 = Interval(ms("2024-01-02"), ms("2024-01-03"))
    a = index_partition(t.slice(0, 3), s, version=VERSION, deep_storage=indexer_deep_storage)
    b = index_partition(t.slice(3), s, version=VERSION, deep_storage=indexer_deep_storage,
                        partition_offset={day1: 1000, day2: 1000})
    merged = renumber_core(a.segments + b.segments, indexer_deep_storage)
    assert [(x.interval, x.partition_num, x.shard_spec.partitions) for x in merged] == [
        (day1, 0, 2), (day1, 1, 2), (day2, 0, 1)
    ]
    for seg in merged:
        assert indexer_deep_storage.exists(segment_data_key(seg.id))
    assert not indexer_deep_storage.exists(segment_data_key(b.segments[0].id))
    # without deep storage, only the shard specs change
    plain = renumber_core(a.segments + b.segments)
    assert [x.partition_num for x in plain] == [0, 1, 0]
    assert plain[1].load_spec == b.segments[0].load_spec
    with pytest.raises(ValueError, match="duplicate partition numbers"):
        renumber_core(a.segments + a.segments)


def test_publish_writes_descriptors_and_metadata(indexer_deep_storage: Any, tmp_path: Path) -> None:
    from radstack.storage.metadata import MetadataStore, SegmentExistsError
    from radstack.storage.publish import publish

    store = MetadataStore.from_url(f"sqlite:///{tmp_path / 'md.db'}")
    store.create_tables()
    res = index_partition(events(), schema(), version=VERSION, deep_storage=indexer_deep_storage)
    old = DataSegment("events", Interval(ms("2024-01-01"), ms("2024-01-02")), "2023-01-01T00:00:00.000Z",
                      load_spec={"type": "local", "path": "/nowhere"})
    store.publish([old])
    publish(store, indexer_deep_storage, res.segments, mark_unused_ids=[old.identifier])
    for seg in res.segments:
        desc = orjson.loads(indexer_deep_storage.get_bytes(segment_descriptor_key(seg.id)))
        assert DataSegment.from_json(desc) == seg
        assert desc["loadSpec"] == seg.load_spec
    got = {s.identifier for s in store.segments("events")}
    assert got == {s.identifier for s in res.segments}
    assert old.identifier not in got
    assert {s.identifier for s in store.segments("events", used=False)} == {old.identifier}
    # publishing the same ids again is refused as a whole
    with pytest.raises(SegmentExistsError):
        publish(store, indexer_deep_storage, res.segments)
    with pytest.raises(ValueError, match="duplicate segment ids"):
        publish(store, indexer_deep_storage, res.segments + res.segments[:1])


def test_ingest_stats_merge_caps_samples() -> None:
    a = IngestStats(processed=1, unparseable=1, max_samples=2)
    a.add_sample({"x": 1}, "r1")
    b = IngestStats(processed=2, thrown_away=3, filtered=1, processed_bytes=10)
    b.add_sample({"x": 2}, "r2")
    b.add_sample({"x": 3}, "r3")
    a.merge(b)
    assert (a.processed, a.thrown_away, a.filtered, a.processed_bytes, a.unparseable) == (3, 3, 1, 10, 1)
    assert [(s["input"], s["details"]) for s in a.samples] == [('{"x":1}', ["r1"]), ('{"x":2}', ["r2"])]


# ---- transformSpec ---------------------------------------------------------------------------------


def _tx_data() -> pa.Table:
    return pa.table({
        "ts": ["2024-01-01T10:05:00Z", "2024-01-01T10:06:00Z", "2024-01-01T10:07:00Z", "2024-01-01T23:30:00Z"],
        "country": ["de", "fr", "de", "de"],
        "code": [1, 2, 3, 4],
        "clicks": [1, 2, 3, 4],
    })


def test_transforms_overwrite_inputs_and_add_columns() -> None:
    s = schema(
        dimensionsSpec={"dimensions": ["country", "tag"]},
        metricsSpec=[{"type": "count", "name": "count"},
                     {"type": "longSum", "name": "double_clicks", "expression": "clicks * 2"}],
        transformSpec={"transforms": [
            {"type": "expression", "name": "country", "expression": "upper(country)"},
            # transforms read the input row, not each other's output (Druid)
            {"type": "expression", "name": "tag", "expression": "concat(country, '-', code)"},
        ]},
        granularitySpec={"queryGranularity": "day", "rollup": False},
    )
    got = [(r["country"], r["tag"], r["double_clicks"]) for r in rows(build_segment_tables(_tx_data(), s)[0])]
    assert got == [("DE", "de-1", 2), ("DE", "de-3", 6), ("DE", "de-4", 8), ("FR", "fr-2", 4)]


def test_time_transform_replaces_the_timestamp() -> None:
    s = schema(
        metricsSpec=[{"type": "count", "name": "count"}],
        transformSpec={"transforms": [{"type": "expression", "name": "__time", "expression": "__time + 3600000"}]},
        granularitySpec={"segmentGranularity": "day", "queryGranularity": "hour"},
    )
    pieces, _, stats = build_segment_tables(_tx_data(), s)
    assert [(format_instant(p.interval.start), p.table.num_rows) for p in pieces] == [
        ("2024-01-01T00:00:00.000Z", 3), ("2024-01-02T00:00:00.000Z", 1)
    ]
    assert rows(pieces)[0]["__time"] == "2024-01-01T11:00:00.000Z"
    assert stats.processed == 4


def test_filter_runs_on_transformed_rows_and_counts_thrown_away() -> None:
    s = schema(
        dimensionsSpec={"dimensions": ["country"]},
        metricsSpec=[{"type": "longSum", "name": "clicks", "fieldName": "clicks"}],
        transformSpec={
            "transforms": [{"type": "expression", "name": "country", "expression": "upper(country)"}],
            "filter": {"type": "selector", "dimension": "country", "value": "DE"},
        },
        granularitySpec={"queryGranularity": "hour", "intervals": ["2024-01-01T00:00/2024-01-01T12:00"],
                         "segmentGranularity": "hour"},
    )
    pieces, _, stats = build_segment_tables(_tx_data(), s)
    assert [(r["country"], r["clicks"]) for r in rows(pieces)] == [("DE", 4)]
    assert stats.filtered == 1
    assert stats.thrown_away == 2  # the filtered FR row + the 23:30 row outside the intervals
    assert stats.processed == 2
    assert stats.row_stats()["thrownAway"] == 2


def test_filter_without_transforms_and_on_time() -> None:
    s = schema(
        metricsSpec=[{"type": "count", "name": "count"}],
        transformSpec={"filter": {"type": "interval", "dimension": "__time",
                                  "intervals": ["2024-01-01T10:06:00Z/2024-01-01T12:00:00Z"]}},
    )
    pieces, _, stats = build_segment_tables(_tx_data(), s)
    assert sum(p.table.num_rows for p in pieces) == 2  # de@10 and fr@10 groups
    assert stats.filtered == 2 and stats.processed == 2


def test_descriptor_goes_beside_the_data_its_load_spec_names(indexer_deep_storage: Any) -> None:
    from radstack.storage.publish import descriptor_key

    t = events()
    a = index_partition(t.slice(0, 3), schema(), version=VERSION, deep_storage=indexer_deep_storage)
    day1 = Interval(ms("2024-01-01"), ms("2024-01-02"))
    b = index_partition(t.slice(3, 1), schema(), version=VERSION, deep_storage=indexer_deep_storage,
                        partition_offset={day1: 7})
    merged = renumber_core(a.segments + b.segments)  # data not moved: partition 1 lives under .../7/
    moved = merged[1]
    assert moved.partition_num == 1
    key = descriptor_key(indexer_deep_storage, moved)
    assert key == segment_data_key(b.segments[0].id).rsplit("/", 1)[0] + "/descriptor.json"
    assert descriptor_key(indexer_deep_storage, merged[0]) == segment_descriptor_key(merged[0].id)
