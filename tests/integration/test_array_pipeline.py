"""ARRAY columns through the Spark pipeline: events parsed by Spark, rolled up by the shared indexer
(the streaming path) and by the batch rebuild's Spark rollup + segment writer, must store the same
whole arrays — order, repeats, NULL elements and ``[]`` kept, elements converted to the column's type —
mark the columns as ARRAY in the segment file, and roll up rows whose arrays are equal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from radstack.storage.segment_format import value_type_of
from tests.fixtures.pipeline_paths import both_paths

pytestmark = pytest.mark.slow

SPEC = {
    "dataSchema": {
        "dataSource": "arrays",
        "timestampSpec": {"column": "ts", "format": "iso"},
        "dimensionsSpec": {"dimensions": [
            "kind",
            {"type": "auto", "name": "tags", "castToType": "ARRAY<STRING>"},
            {"type": "auto", "name": "codes", "castToType": "ARRAY<LONG>"},
            {"type": "auto", "name": "scores", "castToType": "ARRAY<DOUBLE>"},
        ]},
        "metricsSpec": [{"type": "count", "name": "count"}],
        "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "minute", "rollup": True},
    },
}
EVENTS = [
    {"ts": "2026-01-01T00:00:10Z", "kind": "a", "tags": ["b", "a", "b"], "codes": [1, 2], "scores": [0.5]},
    {"ts": "2026-01-01T00:00:20Z", "kind": "a", "tags": ["b", "a", "b"], "codes": [1, 2], "scores": [0.5]},
    {"ts": "2026-01-01T00:00:25Z", "kind": "a", "tags": ["a", "b", "b"], "codes": [1, 2], "scores": [0.5]},
    {"ts": "2026-01-01T00:00:30Z", "kind": "b", "tags": [1, None, "z"], "codes": ["3", "x", 4.9], "scores": 2},
    {"ts": "2026-01-01T00:00:40Z", "kind": "c", "tags": [], "codes": None},
    {"ts": "2026-01-01T00:00:50Z", "kind": "d", "tags": "solo", "codes": 7, "scores": []},
]
EXPECTED = sorted([
    ("a", ["b", "a", "b"], [1, 2], [0.5], 2),  # the first two roll up; the third's order differs
    ("a", ["a", "b", "b"], [1, 2], [0.5], 1),
    ("b", ["1", None, "z"], [3, None, 4], [2.0], 1),
    ("c", [], None, None, 1),
    ("d", ["solo"], [7], [], 1),
], key=repr)


def _rows(paths: list[str]) -> list[tuple[Any, ...]]:
    out = []
    for p in paths:
        t = pq.read_table(p)
        assert [value_type_of(t.schema.field(c)) for c in ("tags", "codes", "scores")] == [
            "array<string>", "array<long>", "array<double>"]
        out += [(r["kind"], r["tags"], r["codes"], r["scores"], r["count"]) for r in t.to_pylist()]
    return sorted(out, key=repr)


def test_stream_and_batch_paths_store_the_same_arrays(spark_session: Any, tmp_path: Path) -> None:
    stream, batch = both_paths(spark_session, SPEC, EVENTS, tmp_path)
    assert _rows(stream) == EXPECTED
    assert _rows(batch) == EXPECTED
