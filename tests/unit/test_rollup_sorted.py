"""The batch rebuild's vectorised rollup (radstack.pipeline.rollup.rollup_sorted, through the segment
writer) gives the same rows as the shared indexer's DuckDB rollup, however Spark cuts a partition
into Arrow batches and however many of them the writer gathers before it rolls up: runs and copies
that cross batch boundaries, NULL keys and NULL metric inputs."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from radstack.pipeline import indexing as segments
from radstack.pipeline.indexing import _PartitionWriter, indexer_schema
from radstack.pipeline.rollup import BYTES, DEDUP, ERRORS, SEGMENT_START
from radstack.spec import TIME_COLUMN, DataSchema, parse_data_schema
from radstack.storage.deep_storage.local import LocalDeepStorage
from radstack.storage.indexer import build_segment_tables
from radstack.storage.segment_format import read_segment_table
from radstack.time.floor import floor_millis

HOUR = 3_600_000
MINUTE = 60_000


def schema(rollup: bool = True) -> DataSchema:
    return parse_data_schema(
        {
            "dataSource": "events",
            "timestampSpec": {"column": "__time", "format": "millis"},
            "dimensionsSpec": {"dimensions": ["country", {"type": "long", "name": "code"}]},
            "metricsSpec": [
                {"type": "count", "name": "count"},
                {"type": "longSum", "name": "clicks", "fieldName": "clicks"},
                {"type": "doubleMin", "name": "minRevenue", "fieldName": "revenue"},
                {"type": "doubleMax", "name": "maxRevenue", "fieldName": "revenue"},
                {"type": "floatSum", "name": "weight", "fieldName": "w"},
            ],
            "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "minute", "rollup": rollup},
        }
    )


def events(rng: random.Random, n: int) -> list[dict[str, Any]]:
    """Events over 3 hours with few distinct keys (long runs), NULLs, and exact re-sends."""
    out = []
    for i in range(n):
        out.append(
            {
                TIME_COLUMN: rng.randrange(0, 3 * HOUR // MINUTE) * MINUTE + rng.randrange(MINUTE),
                "country": rng.choice(["de", "fr", None, "ünï"]),
                "code": rng.choice([1, 2, None]),
                "clicks": rng.choice([0, 1, 5, None]),
                "revenue": rng.choice([0.5, 1.25, -2.0, None]),
                "w": rng.choice([0.5, 2.0, None]),
                DEDUP: f"e{i}",
            }
        )
    out += [dict(rng.choice(out)) for _ in range(n // 5)]  # copies of random events
    return out


def writer_input(rows: list[dict[str, Any]], s: DataSchema) -> pa.Table:
    """What rollup_rows hands the writer: floored time, typed inputs named as the metrics, sorted."""
    table = pa.Table.from_pylist(rows)
    t = floor_millis(table.column(TIME_COLUMN).to_numpy(), s.query_granularity)
    out = pa.table(
        {
            TIME_COLUMN: pa.array(t, pa.int64()),
            "country": table.column("country").cast(pa.string()),
            "code": table.column("code").cast(pa.int64()),
            "clicks": table.column("clicks").cast(pa.int64()),
            "minRevenue": table.column("revenue").cast(pa.float64()),
            "maxRevenue": table.column("revenue").cast(pa.float64()),
            "weight": table.column("w").cast(pa.float32()),
            DEDUP: table.column(DEDUP),
            SEGMENT_START: pa.array(floor_millis(t, s.segment_granularity), pa.int64()),
            BYTES: pa.array([10] * len(t), pa.int64()),
            ERRORS: pa.array([0] * len(t), pa.int32()),
        }
    )
    keys = [(c, "ascending", "at_start") for c in (SEGMENT_START, TIME_COLUMN, "country", "code", DEDUP)]
    return out.take(pc.sort_indices(out, sort_keys=keys))


def oracle(rows: list[dict[str, Any]], s: DataSchema) -> list[dict[str, Any]]:
    """The shared indexer over the deduplicated events."""
    seen, unique = set(), []
    for r in rows:
        if r[DEDUP] not in seen:
            seen.add(r[DEDUP])
            unique.append({k: v for k, v in r.items() if k != DEDUP})
    pieces, _, _ = build_segment_tables(pa.Table.from_pylist(unique), indexer_schema(s))
    return [row for p in pieces for row in p.table.to_pylist()]


def written(table: pa.Table, s: DataSchema, tmp: Path, batch_sizes: list[int]) -> tuple[list[dict[str, Any]], Any]:
    storage = LocalDeepStorage(tmp / "deep")
    w = _PartitionWriter(s, storage, "v1", 0, 1_000_000, str(tmp), True)
    at = 0
    for size in batch_sizes:
        for b in table.slice(at, size).to_batches():
            w.write(b)
        at += size
    w.close()
    out = []
    for seg in sorted(w.segments, key=lambda x: x.interval.start):
        out += read_segment_table(seg.load_spec["path"]).to_pylist()
    return out, w


def _normal(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    def key(v: Any) -> Any:
        if hasattr(v, "timestamp"):
            return int(v.timestamp() * 1000)
        return round(v, 4) if isinstance(v, float) else v

    return [tuple(key(v) for v in r.values()) for r in rows]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("rollup", [True, False])
@pytest.mark.parametrize("group", [1, 40, segments.ROLLUP_GROUP_ROWS])
def test_matches_the_indexer_for_any_batch_cut(tmp_path: Path, seed: int, rollup: bool, group: int,
                                               monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setattr(segments, "ROLLUP_GROUP_ROWS", group)  # 1: every batch on its own
    rng = random.Random(seed)
    s = schema(rollup)
    rows = events(rng, 600)
    table = writer_input(rows, s)
    cuts, left = [], table.num_rows
    while left:
        k = min(left, rng.choice([1, 2, 3, 17, 50, 200]))
        cuts.append(k)
        left -= k
    got, w = written(table, s, tmp_path, cuts)
    want = oracle(rows, s)
    assert len(got) == len(want)
    if rollup:  # rollup output is fully ordered by key; without rollup, rows of one key may come in any order
        assert _normal(got) == _normal(want)
    else:
        assert sorted(_normal(got), key=repr) == sorted(_normal(want), key=repr)
    assert w.stats.processed == 600
    assert w.stats.processed_bytes == 6000
    assert {seg.interval.start for seg in w.segments} == {0, HOUR, 2 * HOUR}


def test_one_key_over_many_batches_is_one_row(tmp_path: Path) -> None:
    s = schema()
    rows = [{TIME_COLUMN: 1000, "country": "de", "code": 1, "clicks": 1, "revenue": float(i), "w": 1.0,
             DEDUP: f"e{i // 2}"} for i in range(0, 2000)]  # fmt: skip
    for r in rows:  # copies must be exact
        r["revenue"] = float(int(r[DEDUP][1:]))
    got, w = written(writer_input(rows, s), s, tmp_path, [7] * (2000 // 7) + [2000 % 7])
    assert len(got) == 1
    assert got[0]["count"] == 1000 and got[0]["clicks"] == 1000
    assert got[0]["minRevenue"] == 0.0 and got[0]["maxRevenue"] == 999.0
    assert w.stats.processed == 1000


def test_a_byte_bound_rolls_up_before_the_row_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Large events: the writer holds at most about ROLLUP_GROUP_BYTES of input before it rolls up."""
    s = schema()
    rows = events(random.Random(4), 300)
    table = writer_input(rows, s)
    monkeypatch.setattr(segments, "ROLLUP_GROUP_BYTES", table.slice(0, 25).nbytes)
    held = []
    real = _PartitionWriter._roll_pending

    def spy(self: _PartitionWriter) -> None:
        held.append(self._pending_rows)
        real(self)

    monkeypatch.setattr(_PartitionWriter, "_roll_pending", spy)
    got, _ = written(table, s, tmp_path, [10] * (table.num_rows // 10) + [table.num_rows % 10])
    assert _normal(got) == _normal(oracle(rows, s))
    assert max(held) <= 30 and len(held) >= table.num_rows // 30
