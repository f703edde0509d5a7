"""One pass over a micro-batch (``realtime.streaming.micro_batch``): counts, dead letters and
segments from one Arrow partition, without Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from radstack.spec import load_datasource_spec
from radstack.storage.deep_storage import open_deep_storage
from realtime.streaming.micro_batch import KEEP_COLUMN, BatchOutcome, process_partition

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
MIN = 60_000


def _spec() -> Any:
    return load_datasource_spec({
        "dataSchema": {
            "dataSource": "mb",
            "timestampSpec": {"column": "ts"},
            "dimensionsSpec": {"dimensions": ["page"]},
            "metricsSpec": [{"type": "count", "name": "count"}],
            "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "minute"},
        },
        "processing": {"topics": ["edits"], "eventId": "id"},
    })  # fmt: skip


def _table(rows: list[dict[str, Any]]) -> pa.Table:
    cols = {
        "__time": pa.array([r.get("time") for r in rows], pa.int64()),
        "page": pa.array([r.get("page") for r in rows], pa.string()),
        "__reason": pa.array([r.get("reason") for r in rows], pa.string()),
        "__raw": pa.array([r.get("raw") for r in rows], pa.binary()),
        "__topic": pa.array(["edits"] * len(rows), pa.string()),
        "__partition": pa.array([r.get("part", 0) for r in rows], pa.int32()),
        "__offset": pa.array([r["off"] for r in rows], pa.int64()),
        KEEP_COLUMN: pa.array([r.get("keep", True) for r in rows], pa.bool_()),
    }
    return pa.table(cols)


ROWS = [
    {"time": T0 + 5 * MIN, "page": "a", "off": 10},
    {"time": T0 + 6 * MIN, "page": "b", "off": 11},
    {"time": T0 + 7 * MIN, "page": "a", "off": 12, "keep": False},  # rejected by the transform filter
    {"time": T0 - 30 * MIN, "page": "a", "off": 13},  # late: below the threshold
    {"reason": "malformed JSON", "raw": b"{oops", "off": 14},
    {"time": T0 + 2 * 3_600_000, "page": "c", "off": 3, "part": 1},  # another hour, another partition
]


def _run(tmp_path: Path, table: pa.Table, **kw: Any) -> tuple[list[Any], dict[str, Any], list[pa.Table]]:
    dead: list[pa.Table] = []

    def writer(t: pa.Table, _spec: Any, _bootstrap: str) -> int:
        dead.append(t)
        return t.num_rows

    args: dict[str, Any] = {"threshold_ms": T0 - 10 * MIN, "first_partition": 7, "partition_id": 0, "stride": 1}
    args.update(kw)
    segs, summary = process_partition(
        table, _spec(), deep_storage=open_deep_storage({"type": "local", "path": str(tmp_path)}),
        bootstrap_servers="unused:9092", write_dead_letters=writer, **args,
    )  # fmt: skip
    return segs, summary, dead


def test_counts_rows_invalid_late_and_kept(tmp_path: Path) -> None:
    _segs, s, _dead = _run(tmp_path, _table(ROWS))
    assert (s["rows"], s["invalid"], s["late"], s["kept"]) == (6, 1, 1, 3)
    assert s["stats"]["processed"] == 3
    # the watermark candidate: the newest VALID event time, late or rejected rows included
    assert s["maxValidTime"] == T0 + 2 * 3_600_000
    assert sorted(map(tuple, s["offsets"])) == [("edits", 0, 14), ("edits", 1, 3)]


def test_invalid_rows_go_to_the_dead_letter_writer_with_their_bytes(tmp_path: Path) -> None:
    _segs, s, dead = _run(tmp_path, _table(ROWS))
    assert s["deadLettered"] == 1
    assert dead[0].column("__raw").to_pylist() == [b"{oops"]
    assert dead[0].column("__reason").to_pylist() == ["malformed JSON"]


def test_segments_are_appends_numbered_from_the_cursor(tmp_path: Path) -> None:
    segs, _s, _dead = _run(tmp_path, _table(ROWS), first_partition=40, partition_id=2, stride=3)
    assert sorted((s.interval.start, s.partition_num, s.shard_spec.partitions) for s in segs) == [
        (T0, 46, 0),
        (T0 + 2 * 3_600_000, 46, 0),
    ]
    assert {s.version for s in segs} == {"2026-01-01T00:00:00.000Z", "2026-01-01T02:00:00.000Z"}
    assert sum(s.num_rows for s in segs) == 3  # a, b in two minutes of hour 0; c in hour 2


def test_no_threshold_means_nothing_is_late(tmp_path: Path) -> None:
    _segs, s, _dead = _run(tmp_path, _table(ROWS), threshold_ms=None)
    assert (s["late"], s["kept"]) == (0, 4)


def test_outcome_sums_partitions() -> None:
    out = BatchOutcome()
    stats = {"processed": 2, "processed_bytes": 10, "unparseable": 0, "thrown_away": 0, "filtered": 0,
             "processed_with_error": 0}  # fmt: skip
    out.add({"rows": 3, "invalid": 1, "late": 0, "kept": 2, "deadLettered": 1, "maxValidTime": 5,
             "offsets": [["t", 0, 9]], "stats": stats})  # fmt: skip
    out.add({"rows": 2, "invalid": 0, "late": 1, "kept": 1, "deadLettered": 0, "maxValidTime": 7,
             "offsets": [["t", 0, 4], ["t", 1, 2]], "stats": stats})  # fmt: skip
    assert (out.rows, out.invalid, out.late, out.kept, out.in_window) == (5, 1, 1, 3, 3)
    assert out.max_valid_time == 7 and out.offsets == {("t", 0): 9, ("t", 1): 2}
    assert out.stats is not None and out.stats.processed == 4


def test_more_pieces_than_the_stride_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import radstack.pipeline.indexing as pipeline_segments

    real = pipeline_segments.index_partition
    monkeypatch.setattr(pipeline_segments, "index_partition", lambda *a, **k: real(*a, **{**k, "max_rows_per_segment": 1}))
    with pytest.raises(ValueError, match="stride"):
        _run(tmp_path, _table(ROWS), stride=1)


def test_kept_rows_go_to_the_processed_topic_before_rollup(tmp_path: Path) -> None:
    import orjson

    from radstack.spec import load_datasource_spec
    from realtime.streaming.processed import processed_rows

    spec = _spec()
    with_topic = load_datasource_spec({"dataSchema": spec.data_schema.to_json(),
                                       "processing": {"topics": ["edits"], "processedTopic": "edits-processed"}})  # fmt: skip
    written: list[pa.Table] = []

    def rows_writer(t: pa.Table, s: Any, _bootstrap: str) -> int:
        assert s.processing.processed_topic == "edits-processed"
        written.append(t)
        return t.num_rows

    args: dict[str, Any] = {"threshold_ms": T0 - 10 * MIN, "first_partition": 7, "partition_id": 0, "stride": 1}
    _segs, summary = process_partition(
        _table(ROWS), with_topic, deep_storage=open_deep_storage({"type": "local", "path": str(tmp_path)}),
        bootstrap_servers="unused:9092", write_dead_letters=lambda t, *_: t.num_rows, write_processed=rows_writer,
        **args,
    )  # fmt: skip
    assert summary["processedTopic"] == 3  # kept rows only: not the rejected, late or invalid ones
    (table,) = written
    assert "__raw" not in table.column_names and "__keep" not in table.column_names
    rows = [orjson.loads(b) for b in processed_rows(table)]
    assert sorted((r["__time"], r["page"]) for r in rows) == [
        (T0 + 5 * MIN, "a"), (T0 + 6 * MIN, "b"), (T0 + 2 * 3_600_000, "c")]  # fmt: skip

    # without a processed topic nothing is written
    _segs, summary = process_partition(
        _table(ROWS), spec, deep_storage=open_deep_storage({"type": "local", "path": str(tmp_path / "b")}),
        bootstrap_servers="unused:9092", write_dead_letters=lambda t, *_: t.num_rows, write_processed=rows_writer,
        **args,
    )  # fmt: skip
    assert summary["processedTopic"] == 0 and len(written) == 1


def test_processed_rows_write_time_as_epoch_millis_and_leave_nulls_out() -> None:
    import orjson

    from realtime.streaming.processed import processed_rows

    us = pa.array([T0 * 1000 + 999, (T0 + 1) * 1000], pa.timestamp("us", tz="UTC"))  # Spark's unit; sub-ms cut
    t = pa.table({"__time": us, "page": ["a", None], "price": [1.5, 2.0]})
    assert [orjson.loads(b) for b in processed_rows(t)] == [
        {"__time": T0, "page": "a", "price": 1.5}, {"__time": T0 + 1, "price": 2.0}]  # fmt: skip
