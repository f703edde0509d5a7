"""One pass over a micro-batch: counts, dead letters and real-time segments in ONE Spark job.

The sink hands over the deduplicated (and joined) stream's rows after
:func:`radstack.pipeline.batch.finish_pipeline` in its marking form: nothing is dropped, rows the
transforms or filter reject carry ``__keep = false``, and dead letters still carry ``__reason``,
their original bytes and Kafka coordinates. Each Spark partition then runs
:func:`process_partition` on the executors (``mapInArrow``):

* counts rows, invalid rows, late rows (``__time`` below the sink's window-period threshold), rows
  kept, the newest valid event time and the last offset per topic-partition;
* produces the invalid rows to their dead-letter topics (confluent-kafka, acks=all);
* produces the kept rows, before rollup, to the processed topic when the spec names one
  (:mod:`realtime.streaming.processed`, for a Druid cluster's Kafka supervisor);
* indexes the kept rows with the shared indexer into ``numbered`` append partitions numbered from
  ``first_partition + partition id × stride`` (the sink's partition cursor).

Doing all of it in one pass means the micro-batch — Kafka read, parse, the stateful dedup — runs
exactly once, with no cached copy of it (see docs/benchmarks.md for what that bought).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from radstack.pipeline.indexing import index_table, interval_start_version
from radstack.pipeline.parse import OFFSET_COLUMN, PARTITION_COLUMN, RAW_COLUMN, REASON_COLUMN, TOPIC_COLUMN
from radstack.pipeline.window import late_mask
from radstack.spec import TIME_COLUMN, DatasourceSpec
from radstack.storage.deep_storage import open_deep_storage
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.indexer import IngestStats
from radstack.storage.segments import DataSegment
from realtime.streaming.dlq import produce_dead_letters
from realtime.streaming.processed import produce_processed

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from radstack.storage.indexer import IngestStats
    from radstack.storage.segments import DataSegment

__all__ = ["KEEP_COLUMN", "BOOKKEEPING", "BatchOutcome", "process_partition", "process_micro_batch"]

KEEP_COLUMN = "__keep"
#: what rides along with the pipeline columns into :func:`process_partition`
BOOKKEEPING = (REASON_COLUMN, RAW_COLUMN, TOPIC_COLUMN, PARTITION_COLUMN, OFFSET_COLUMN)
RESULT_SCHEMA = "segment STRING, summary STRING"


@dataclass
class BatchOutcome:
    """What one micro-batch did, summed over its Spark partitions."""

    rows: int = 0
    invalid: int = 0
    late: int = 0
    #: valid, not late, accepted by the transforms and filter (what went to the indexer)
    kept: int = 0
    dead_lettered: int = 0
    #: rows written to the processed topic (0 when the spec names none)
    processed_topic: int = 0
    max_valid_time: int | None = None
    #: (topic, partition) → the highest offset read
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    segments: list[DataSegment] = field(default_factory=list)
    stats: IngestStats | None = None

    @property
    def in_window(self) -> int:
        return self.rows - self.invalid - self.late

    def add(self, s: Mapping[str, Any]) -> None:

        self.rows += int(s["rows"])
        self.invalid += int(s["invalid"])
        self.late += int(s["late"])
        self.kept += int(s["kept"])
        self.dead_lettered += int(s["deadLettered"])
        self.processed_topic += int(s.get("processedTopic", 0))
        if s["maxValidTime"] is not None:
            self.max_valid_time = max(self.max_valid_time or s["maxValidTime"], int(s["maxValidTime"]))
        for topic, part, off in s["offsets"]:
            k = (str(topic), int(part))
            self.offsets[k] = max(self.offsets.get(k, -1), int(off))
        if self.stats is None:
            self.stats = IngestStats()
        for k, v in s["stats"].items():
            setattr(self.stats, k, getattr(self.stats, k) + int(v))


def _mask_and(a: pa.ChunkedArray | pa.Array, b: pa.ChunkedArray | pa.Array) -> Any:

    return pc.and_(pc.fill_null(a, False), pc.fill_null(b, False))


def process_partition(
    table: pa.Table,
    spec: DatasourceSpec,
    *,
    threshold_ms: int | None,
    deep_storage: DeepStorage,
    bootstrap_servers: str,
    first_partition: int,
    partition_id: int,
    stride: int,
    write_dead_letters: Callable[[pa.Table, DatasourceSpec, str], int] | None = None,
    write_processed: Callable[[pa.Table, DatasourceSpec, str], int] | None = None,
) -> tuple[list[DataSegment], dict[str, Any]]:
    """Count, dead-letter and index one Spark partition of a micro-batch (see the module doc).
    ``write_dead_letters`` (default :func:`realtime.streaming.dlq.produce_dead_letters`) gets the
    invalid rows and returns how many it delivered; ``write_processed`` (default
    :func:`realtime.streaming.processed.produce_processed`) the kept rows, when the spec has a
    processed topic."""
    write = write_dead_letters or produce_dead_letters
    write_rows = write_processed or produce_processed

    n = table.num_rows
    invalid = pc.is_valid(table.column(REASON_COLUMN))
    valid = pc.invert(invalid)
    times = table.column(TIME_COLUMN)
    late = _mask_and(valid, late_mask(times, threshold_ms))
    ok = _mask_and(valid, pc.invert(late))
    kept = _mask_and(ok, table.column(KEEP_COLUMN)) if KEEP_COLUMN in table.column_names else ok
    n_invalid = pc.sum(invalid).as_py() or 0
    max_valid = pc.max(pc.filter(times, valid)).as_py() if n else None
    offsets = (
        table.select([TOPIC_COLUMN, PARTITION_COLUMN, OFFSET_COLUMN])
        .filter(pc.is_valid(table.column(OFFSET_COLUMN)))
        .group_by([TOPIC_COLUMN, PARTITION_COLUMN])
        .aggregate([(OFFSET_COLUMN, "max")])
    )
    dead = write(table.filter(invalid), spec, bootstrap_servers) if n_invalid else 0
    pipeline_cols = [c for c in table.column_names if c not in (*BOOKKEEPING, KEEP_COLUMN)]
    rows = table.filter(kept).select(pipeline_cols)
    processed = write_rows(rows, spec, bootstrap_servers) if spec.processing.processed_topic else 0
    res = index_table(
        rows,
        # real-time segments carry no projection files: the broker aggregates them when a query
        # reads a projection (they are small and short-lived)
        replace(spec.data_schema, projections=()),
        deep_storage=deep_storage,
        version=interval_start_version,
        shard="append",
        partition_id=partition_id,
        stride=stride,
        first_partition=first_partition,
    )
    st = res.stats
    summary = {
        "rows": n,
        "invalid": n_invalid,
        "late": pc.sum(late).as_py() or 0,
        "kept": pc.sum(kept).as_py() or 0,
        "deadLettered": dead,
        "processedTopic": processed,
        "maxValidTime": max_valid,
        "offsets": [
            [t, p, o]
            for t, p, o in zip(
                offsets.column(TOPIC_COLUMN).to_pylist(),
                offsets.column(PARTITION_COLUMN).to_pylist(),
                offsets.column(f"{OFFSET_COLUMN}_max").to_pylist(),
                strict=True,
            )
        ],
        "stats": {k: getattr(st, k) for k in ("processed", "processed_bytes", "unparseable", "thrown_away",
                                              "filtered", "processed_with_error")},  # fmt: skip
    }
    return res.segments, summary


def process_micro_batch(
    df: DataFrame,
    spec: DatasourceSpec,
    *,
    threshold_ms: int | None,
    deep_storage_config: Mapping[str, Any],
    bootstrap_servers: str,
    first_partition: int,
    stride: int,
) -> BatchOutcome:
    """Run :func:`process_partition` over every Spark partition of ``df`` and sum the outcome."""

    cfg = dict(deep_storage_config)
    spec_ = spec

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext  # lazy: only Spark code paths load pyspark


        bl = list(batches)
        if not bl or not any(b.num_rows for b in bl):
            return
        ctx = TaskContext.get()
        segments, summary = process_partition(
            pa.Table.from_batches(bl),
            spec_,
            threshold_ms=threshold_ms,
            deep_storage=open_deep_storage(cfg),
            bootstrap_servers=bootstrap_servers,
            first_partition=first_partition,
            partition_id=ctx.partitionId() if ctx is not None else 0,
            stride=stride,
        )
        segs: list[str | None] = [json.dumps(s.to_json()) for s in segments]
        yield pa.RecordBatch.from_pydict(
            {"segment": [*segs, None], "summary": [None] * len(segs) + [json.dumps(summary)]},
            schema=pa.schema([("segment", pa.string()), ("summary", pa.string())]),
        )

    out = BatchOutcome()
    for r in df.mapInArrow(run, RESULT_SCHEMA).collect():
        if r["segment"]:
            out.segments.append(DataSegment.from_json(json.loads(r["segment"])))
        if r["summary"]:
            out.add(json.loads(r["summary"]))
    return out
