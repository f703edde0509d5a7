"""A ``json`` dimension through the Spark pipeline: events parsed by Spark (``parse_events``), then
rolled up both ways the platform does it — the shared indexer per partition (the streaming job's
path) and the batch rebuild's Spark rollup + segment writer — must store the same JSON text, roll up
the same documents together, and write Parquet's JSON type."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq
import pytest

from tests.fixtures.pipeline_paths import both_paths

pytestmark = pytest.mark.slow

SPEC = {
    "dataSchema": {
        "dataSource": "nested",
        "timestampSpec": {"column": "ts", "format": "iso"},
        "dimensionsSpec": {"dimensions": ["kind", {"type": "json", "name": "attrs"}]},
        "metricsSpec": [{"type": "count", "name": "count"}],
        "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "minute", "rollup": True},
    },
}
EVENTS = [
    {"ts": "2026-01-01T00:00:10Z", "kind": "a", "attrs": {"user": {"name": "ann", "age": 31}, "tags": ["x", "y"]}},
    {"ts": "2026-01-01T00:00:20Z", "kind": "a", "attrs": {"user": {"name": "ann", "age": 31}, "tags": ["x", "y"]}},
    {"ts": "2026-01-01T00:00:30Z", "kind": "b", "attrs": {"score": 2.5, "ok": True, "none": None}},
    {"ts": "2026-01-01T00:00:40Z", "kind": "c", "attrs": "a plain string"},
    {"ts": "2026-01-01T00:00:50Z", "kind": "d", "attrs": 42},
    {"ts": "2026-01-01T00:00:55Z", "kind": "e", "attrs": [1, {"k": "v"}]},
    {"ts": "2026-01-01T00:00:58Z", "kind": "f"},
]


def _rows(paths: list[str]) -> list[tuple[Any, ...]]:
    out = []
    for p in paths:
        t = pq.read_table(p)
        assert str(t.schema.field("attrs").type) == "extension<arrow.json>"
        out += [(r["kind"], r["attrs"], r["count"]) for r in t.to_pylist()]
    return sorted(out, key=lambda r: r[0])


def test_stream_and_batch_paths_store_the_same_json(spark_session: Any, tmp_path: Path) -> None:
    stream, batch = both_paths(spark_session, SPEC, EVENTS, tmp_path)
    s = _rows(stream)
    b = _rows(batch)
    assert s == b
    got = {kind: (None if text is None else orjson.loads(text), n) for kind, text, n in s}
    assert got == {
        "a": ({"user": {"name": "ann", "age": 31}, "tags": ["x", "y"]}, 2),  # equal documents rolled up
        "b": ({"score": 2.5, "ok": True, "none": None}, 1),
        "c": ("a plain string", 1),
        "d": (42, 1),
        "e": ([1, {"k": "v"}], 1),
        "f": (None, 1),
    }
