"""Druid's roll-up tutorial (docs/tutorials/tutorial-rollup.md), indexed through radstack's indexer.

The nine input events and the five rolled-up rows below are written out from the published tutorial
(``select * from "rollup-tutorial"`` after ingesting ``rollup-data.json`` with ``rollup-index.json``:
``queryGranularity`` minute, ``segmentGranularity`` week, ``count`` + two ``longSum`` metrics).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from radstack.spec import load_datasource_spec
from radstack.storage.indexer import index_partition
from radstack.storage.segment_format import read_segment_table, segment_data_key
from radstack.time.intervals import Interval, format_instant, parse_instant

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rollup-tutorial"

EVENTS = [
    {"timestamp": "2018-01-01T01:01:35Z", "srcIP": "1.1.1.1", "dstIP": "2.2.2.2", "packets": 20, "bytes": 9024},
    {"timestamp": "2018-01-01T01:01:51Z", "srcIP": "1.1.1.1", "dstIP": "2.2.2.2", "packets": 255, "bytes": 21133},
    {"timestamp": "2018-01-01T01:01:59Z", "srcIP": "1.1.1.1", "dstIP": "2.2.2.2", "packets": 11, "bytes": 5780},
    {"timestamp": "2018-01-01T01:02:14Z", "srcIP": "1.1.1.1", "dstIP": "2.2.2.2", "packets": 38, "bytes": 6289},
    {"timestamp": "2018-01-01T01:02:29Z", "srcIP": "1.1.1.1", "dstIP": "2.2.2.2", "packets": 377, "bytes": 359971},
    {"timestamp": "2018-01-01T01:03:29Z", "srcIP": "1.1.1.1", "dstIP": "2.2.2.2", "packets": 49, "bytes": 10204},
    {"timestamp": "2018-01-02T21:33:14Z", "srcIP": "7.7.7.7", "dstIP": "8.8.8.8", "packets": 38, "bytes": 6289},
    {"timestamp": "2018-01-02T21:33:45Z", "srcIP": "7.7.7.7", "dstIP": "8.8.8.8", "packets": 123, "bytes": 93999},
    {"timestamp": "2018-01-02T21:35:45Z", "srcIP": "7.7.7.7", "dstIP": "8.8.8.8", "packets": 12, "bytes": 2818},
]

# The tutorial's query result: __time, bytes, count, dstIP, packets, srcIP.
EXPECTED = [
    ("2018-01-01T01:01:00.000Z", 35937, 3, "2.2.2.2", 286, "1.1.1.1"),
    ("2018-01-01T01:02:00.000Z", 366260, 2, "2.2.2.2", 415, "1.1.1.1"),
    ("2018-01-01T01:03:00.000Z", 10204, 1, "2.2.2.2", 49, "1.1.1.1"),
    ("2018-01-02T21:33:00.000Z", 100288, 2, "8.8.8.8", 161, "7.7.7.7"),
    ("2018-01-02T21:35:00.000Z", 2818, 1, "8.8.8.8", 12, "7.7.7.7"),
]


def _result_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    times = table.column("__time").cast(pa.int64()).to_pylist()
    return [
        (format_instant(t), r["bytes"], r["count"], r["dstIP"], r["packets"], r["srcIP"])
        for t, r in zip(times, table.to_pylist(), strict=True)
    ]


def test_example_data_file_is_the_tutorial_input() -> None:
    lines = (EXAMPLE / "rollup-data.json").read_text().splitlines()
    assert [json.loads(line) for line in lines if line.strip()] == EVENTS


def test_rollup_tutorial_rows(indexer_deep_storage: Any, tmp_path: Path) -> None:
    schema = load_datasource_spec(EXAMPLE / "rollup-index.json").data_schema
    version = "2018-01-03T00:00:00.000Z"
    res = index_partition(pa.Table.from_pylist(EVENTS), schema, version=version, deep_storage=indexer_deep_storage)

    assert res.stats.processed == 9
    assert res.stats.unparseable == 0 and res.stats.thrown_away == 0
    (seg,) = res.segments  # one WEEK segment, one partition
    assert seg.interval == Interval(parse_instant("2018-01-01"), parse_instant("2018-01-08"))
    assert seg.identifier == "rollup-tutorial_2018-01-01T00:00:00.000Z_2018-01-08T00:00:00.000Z_" + version
    assert (seg.shard_spec.partition_num, seg.shard_spec.partitions) == (0, 1)
    assert seg.dimensions == ("srcIP", "dstIP")
    assert seg.metrics == ("count", "packets", "bytes")
    assert seg.num_rows == 5

    local = tmp_path / "segment.parquet"
    indexer_deep_storage.download(segment_data_key(seg.id), local)
    table = read_segment_table(local)
    assert table.column_names == ["__time", "srcIP", "dstIP", "count", "packets", "bytes"]
    assert _result_rows(table) == EXPECTED


def test_rollup_tutorial_yaml_spec_gives_the_same_rows(indexer_deep_storage: Any, tmp_path: Path) -> None:
    schema = load_datasource_spec(EXAMPLE / "rollup-tutorial.yaml").data_schema
    # Events arriving in another order, as two Arrow batches, roll up to the same rows.
    batches = pa.Table.from_pylist(list(reversed(EVENTS))).to_batches(max_chunksize=4)
    res = index_partition(batches, schema, version="v1", deep_storage=indexer_deep_storage)
    (seg,) = res.segments
    local = tmp_path / "segment.parquet"
    indexer_deep_storage.download(segment_data_key(seg.id), local)
    assert _result_rows(read_segment_table(local)) == EXPECTED
