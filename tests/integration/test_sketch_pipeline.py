"""DataSketches metrics through the Spark pipeline: events parsed by Spark and rolled up both ways the
platform does it — the shared indexer (the streaming path) and the batch rebuild's Spark rollup +
segment writer — must hold sketches with the same estimates, per rolled-up row."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from radstack.sketches import aggregate, estimate, quantile
from radstack.spec import load_datasource_spec
from tests.fixtures.pipeline_paths import both_paths

pytestmark = pytest.mark.slow

SPEC = {
    "dataSchema": {
        "dataSource": "sketched",
        "timestampSpec": {"column": "ts", "format": "iso"},
        "dimensionsSpec": {"dimensions": ["page"]},
        "metricsSpec": [
            {"type": "count", "name": "count"},
            {"type": "HLLSketchBuild", "name": "users", "fieldName": "user"},
            {"type": "thetaSketch", "name": "users_theta", "fieldName": "user", "size": 4096},
            {"type": "quantilesDoublesSketch", "name": "latency", "fieldName": "ms"},
        ],
        "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "hour", "rollup": True},
    },
}


def _summaries(paths: list[str], spec: Any) -> dict[str, tuple[Any, ...]]:
    """Per page: rows, and the estimates of its sketches merged over every segment file (the streaming
    path writes one set of files per Spark partition)."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for p in paths:
        for r in pq.read_table(p).to_pylist():
            rows.setdefault(r["page"], []).append(r)
    metrics = {m.name: m.sketch for m in spec.data_schema.metrics if m.sketch is not None}
    out = {}
    for page, rs in rows.items():
        merged = {n: aggregate(params, [r[n] for r in rs], sketches=True) for n, params in metrics.items()}
        out[page] = (sum(r["count"] for r in rs), round(estimate(merged["users"]), 6),
                     round(estimate(merged["users_theta"]), 6), quantile(merged["latency"], 0.5))
    return out


def test_stream_and_batch_build_the_same_sketches(spark_session: Any, tmp_path: Path) -> None:
    rng = random.Random(3)
    events = [{"ts": f"2026-01-01T00:{i % 60:02d}:00Z", "page": rng.choice("AB"), "user": f"u{rng.randrange(700)}",
               "ms": rng.randrange(1, 500)} for i in range(2000)]
    stream, batch = both_paths(spark_session, SPEC, events, tmp_path)
    spec = load_datasource_spec(SPEC)
    s = _summaries(stream, spec)
    b = _summaries(batch, spec)
    # Rows and the theta estimate (below its size: exact) agree exactly. HLL and quantiles sketches are
    # approximate, and their answers depend on how the values were split before merging (the stream
    # path merges one partial sketch per Spark partition; Druid merges per segment): both paths must be
    # within the sketches' error of the truth.
    for page in "AB":
        users = {e["user"] for e in events if e["page"] == page}
        latencies = sorted(e["ms"] for e in events if e["page"] == page)
        assert s[page][0] == b[page][0] == len(latencies)
        assert s[page][2] == b[page][2] == len(users)
        for got in (s[page], b[page]):
            assert abs(got[1] - len(users)) < 0.03 * len(users)
            rank = sum(v <= got[3] for v in latencies) / len(latencies)
            assert abs(rank - 0.5) < 0.03
