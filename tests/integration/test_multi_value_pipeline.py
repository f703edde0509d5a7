"""Multi-value string dimensions through the Spark pipeline: events parsed by Spark, rolled up by the
shared indexer (the streaming path) and by the batch rebuild's Spark rollup + segment writer, must
store the same lists — JSON arrays and single values alike, per ``multiValueHandling`` — and roll up
rows with the same values together."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.fixtures.pipeline_paths import both_paths

pytestmark = pytest.mark.slow

SPEC = {
    "dataSchema": {
        "dataSource": "tagged",
        "timestampSpec": {"column": "ts", "format": "iso"},
        "dimensionsSpec": {"dimensions": [
            "kind",
            {"type": "string", "name": "tags", "multiValueHandling": "SORTED_ARRAY"},
            {"type": "string", "name": "set", "multiValueHandling": "SORTED_SET"},
            {"type": "string", "name": "seq", "multiValueHandling": "ARRAY"},
        ]},
        "metricsSpec": [{"type": "count", "name": "count"}],
        "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "minute", "rollup": True},
    },
}
EVENTS = [
    {"ts": "2026-01-01T00:00:10Z", "kind": "a", "tags": ["y", "x"], "set": ["b", "a", "b"], "seq": ["b", "a", "b"]},
    {"ts": "2026-01-01T00:00:20Z", "kind": "a", "tags": ["x", "y"], "set": ["a", "b"], "seq": ["b", "a", "b"]},
    {"ts": "2026-01-01T00:00:30Z", "kind": "b", "tags": "solo", "set": 7, "seq": [1, None, "z", ["n", [2]]]},
    {"ts": "2026-01-01T00:00:40Z", "kind": "c", "tags": [], "set": None},
    {"ts": "2026-01-01T00:00:50Z", "kind": "d", "tags": ["b", None, "a"], "set": ["b", None, "b", None],
     "seq": [None]},
]
EXPECTED = {
    "a": (["x", "y"], ["a", "b"], ["b", "a", "b"], 2),  # the two rows roll up: same values once sorted
    # as Druid stores them: NULL elements kept (sorted first), a nested array as Java prints a list
    "b": (["solo"], ["7"], ["1", None, "z", "[n, [2]]"], 1),
    "c": (None, None, None, 1),
    "d": ([None, "a", "b"], [None, "b"], [None], 1),
}


def _rows(paths: list[str]) -> dict[str, tuple[Any, ...]]:
    out = {}
    for p in paths:
        t = pq.read_table(p)
        assert all(str(t.schema.field(c).type) == "list<element: string>" for c in ("tags", "set", "seq"))
        for r in t.to_pylist():
            out[r["kind"]] = (r["tags"], r["set"], r["seq"], r["count"])
    return out


def test_stream_and_batch_paths_store_the_same_values(spark_session: Any, tmp_path: Path) -> None:
    stream, batch = both_paths(spark_session, SPEC, EVENTS, tmp_path)
    assert _rows(stream) == EXPECTED
    assert _rows(batch) == EXPECTED
