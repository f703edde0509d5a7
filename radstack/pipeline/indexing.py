"""Hand a DataFrame to the shared indexer (:func:`radstack.storage.indexer.index_partition`) one Arrow
partition at a time, on the executors (``mapInArrow``), and get the DataSegments back.

The rows are pipeline output: ``__time`` BIGINT millis plus the dimension and metric input columns,
already transformed and filtered in Spark. The indexer therefore runs with :func:`indexer_schema`
(timestamp = ``__time`` in millis, no transforms, no filter) and does the rest: ``queryGranularity``
truncation, rollup, sorting, splitting by ``segmentGranularity``, writing segment files to deep
storage. Nothing is published here.

Partition numbers: Spark partition ``p`` writes partition ``base[(interval, version)] + p * stride``
(+ the piece index when one partition's rows exceed ``max_rows_per_segment``, so ``stride`` must be
at least the largest piece count — pass ``stride`` ≥ 1 + rows / max_rows). Real-time appends use
``numbered`` with ``partitions = 0`` so gaps are harmless; a batch job that wants one core set calls
:func:`radstack.storage.indexer.renumber_core` on the result.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from radstack.pipeline.rollup import BYTES, ERRORS, ROWS, SEGMENT_START, combine, rollup_sorted
from radstack.spec import TIME_COLUMN, DataSchema, TimestampSpec
from radstack.storage.deep_storage import open_deep_storage
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.indexer import (
    DEFAULT_MAX_ROWS_PER_SEGMENT,
    IngestStats,
    index_partition,
    runs,
    store_segment,
)
from radstack.storage.segment_format import SegmentFileWriter, segment_schema
from radstack.storage.segments import DataSegment, ShardSpec
from radstack.time.floor import floor_millis
from radstack.time.intervals import Interval, format_instant

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "RESULT_SCHEMA",
    "IndexedPartition",
    "indexer_schema",
    "interval_start_version",
    "index_dataframe",
    "index_table",
    "write_segments",
]

RESULT_SCHEMA = "segment STRING, processed BIGINT, processed_bytes BIGINT, unparseable BIGINT, thrown_away BIGINT, filtered BIGINT, processed_with_error BIGINT, chunk_rows STRING"


def indexer_schema(schema: DataSchema) -> DataSchema:
    """The schema the indexer gets for pipeline output (timestamp ``__time`` in millis, transforms
    and filter already applied by Spark)."""
    return replace(
        schema,
        timestamp_spec=TimestampSpec(column=TIME_COLUMN, format="millis"),
        transforms=(),
        transform_filter=None,
    )


def interval_start_version(interval: Interval) -> str:
    """The real-time version of an interval: the ISO of its start (as in the RADStack paper)."""
    return format_instant(interval.start)


@dataclass
class IndexedPartition:
    segments: list[DataSegment]
    stats: IngestStats
    #: :func:`write_segments` only: segment bucket start → [rows that reached the writer, events it kept
    #: after the dedup] (what :mod:`radstack.storage.corrections` records)
    chunk_rows: dict[int, list[int]] = field(default_factory=dict)


def index_table(
    table: pa.Table,
    schema: DataSchema,
    *,
    deep_storage: DeepStorage,
    version: str | Callable[[Interval], str] = interval_start_version,
    shard: str = "append",
    base_offsets: Mapping[tuple[Interval, str], int] | None = None,
    partition_id: int = 0,
    stride: int = 1,
    first_partition: int = 0,
) -> IndexedPartition:
    """Index one Arrow table of pipeline rows: split it by segment interval (each interval gets its
    own version), call the indexer per interval, return the segments and merged stats. Partition
    numbers start at ``first_partition + base_offsets[(interval, version)] + partition_id * stride``;
    more pieces than ``stride`` in one interval would collide with the next Spark partition's numbers
    and raise ``ValueError``."""


    ischema = indexer_schema(schema)
    stats = IngestStats()
    segments: list[DataSegment] = []
    if table.num_rows == 0:
        return IndexedPartition(segments, stats)
    gran = schema.segment_granularity
    times = table.column(TIME_COLUMN).combine_chunks().to_numpy(zero_copy_only=False)
    valid = ~np.isnan(times.astype("float64")) if times.dtype.kind == "f" else np.ones(len(times), bool)
    starts = floor_millis(np.where(valid, times, 0).astype(np.int64), gran)
    for start in np.unique(starts[valid]) if valid.any() else []:
        interval = Interval.eternity() if gran.is_all else gran.bucket(int(start))
        ver = version(interval) if callable(version) else version
        mask = (starts == start) & valid
        sub = table.filter(pa.array(mask))
        offset = first_partition + (base_offsets or {}).get((interval, ver), 0) + partition_id * stride
        res = index_partition(
            sub,
            ischema,
            version=ver,
            deep_storage=deep_storage,
            shard="core" if shard == "core" else "append",
            partition_offset={interval: offset},
        )
        if len(res.segments) > stride:
            raise ValueError(f"{len(res.segments)} segments for {interval} from one Spark partition, stride {stride}")
        segments += res.segments
        stats.merge(res.stats)
    return IndexedPartition(segments, stats)


def index_dataframe(
    df: DataFrame,
    schema: DataSchema,
    *,
    deep_storage_config: Mapping[str, Any],
    version: str | Callable[[Interval], str] = interval_start_version,
    shard: str = "append",
    base_offsets: Mapping[tuple[Interval, str], int] | None = None,
    stride: int = 1,
) -> IndexedPartition:
    """Run :func:`index_table` on every Spark partition of ``df`` (``mapInArrow``) and collect the
    segments (written to deep storage, not published) and the summed stats.
    ``deep_storage_config`` is the ``deep_storage`` settings mapping (each task opens its own)."""

    cfg = dict(deep_storage_config)
    offsets = dict(base_offsets or {})
    schema_ = schema
    version_ = version

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext  # lazy: only Spark code paths load pyspark


        bl = [b for b in batches if b.num_rows]
        if not bl:
            return
        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else 0
        res = index_table(
            pa.Table.from_batches(bl),
            schema_,
            deep_storage=open_deep_storage(cfg),
            version=version_,
            shard=shard,
            base_offsets=offsets,
            partition_id=pid,
            stride=stride,
        )
        yield _result_batch(res.segments, res.stats)

    return _collect(df.mapInArrow(run, RESULT_SCHEMA))


_STAT_FIELDS = ("processed", "processed_bytes", "unparseable", "thrown_away", "filtered", "processed_with_error")
_RESULT_ARROW = pa.schema([("segment", pa.string())] + [(c, pa.int64()) for c in _STAT_FIELDS]
                          + [("chunk_rows", pa.string())])


def _result_batch(segments: list[DataSegment], stats: IngestStats,
                  chunk_rows: Mapping[int, list[int]] | None = None) -> pa.RecordBatch:  # fmt: skip
    """One task's answer: a row per segment (JSON), the stats and the per-chunk counts on the first row only."""
    segs: list[str | None] = [json.dumps(s.to_json()) for s in segments] or [None]
    first = [1] + [0] * (len(segs) - 1)
    cols: dict[str, list[Any]] = {"segment": segs}
    for c in _STAT_FIELDS:
        cols[c] = [getattr(stats, c) * f for f in first]
    cols["chunk_rows"] = [json.dumps(chunk_rows or {})] + [None] * (len(segs) - 1)
    return pa.RecordBatch.from_pydict(cols, schema=_RESULT_ARROW)


def _collect(results: DataFrame) -> IndexedPartition:
    stats = IngestStats()
    segments: list[DataSegment] = []
    chunk_rows: dict[int, list[int]] = {}
    for r in results.collect():
        if r["segment"]:
            segments.append(DataSegment.from_json(json.loads(r["segment"])))
        for c in _STAT_FIELDS:
            setattr(stats, c, getattr(stats, c) + r[c])
        for start, (written, kept) in json.loads(r["chunk_rows"] or "{}").items():
            acc = chunk_rows.setdefault(int(start), [0, 0])
            acc[0] += written
            acc[1] += kept
    return IndexedPartition(segments, stats, chunk_rows)


ROLLUP_GROUP_ROWS = 65_536
"""Rows :class:`_PartitionWriter` gathers before it rolls them up: Spark hands over Arrow batches of a
few thousand rows (:func:`radstack.pipeline.spark_session.arrow_batch_conf`), and the vectorised
rollup's fixed cost per call (some 60 Arrow and numpy calls) was about 40 % of the writer's time at that size."""
ROLLUP_GROUP_BYTES = 64 << 20
"""…or this many bytes of them, whichever comes first (large events: a bounded buffer)."""


class _PartitionWriter:
    """Writes one Spark partition's segment rows (sorted by segment bucket, then segment order) as
    segment files: one per segment bucket, a new piece every ``max_rows`` rows. Incoming batches are
    gathered up to :data:`ROLLUP_GROUP_ROWS` rows or :data:`ROLLUP_GROUP_BYTES` bytes, then rolled up
    together."""

    def __init__(self, schema: DataSchema, deep_storage: DeepStorage, version: str, first: int, max_rows: int,
                 tmp: str, dedup: bool) -> None:  # fmt: skip
        self.schema = schema
        self.dedup = dedup
        self._last_input: pa.Table | None = None
        self._held: pa.Table | None = None
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._pending_bytes = 0
        self.storage = deep_storage
        self.version = version
        self.first = first
        self.max_rows = max_rows
        self.tmp = tmp
        self.dims = tuple(d.name for d in schema.resolve_dimensions(()))
        self.arrow_schema = segment_schema(schema)
        self.segments: list[DataSegment] = []
        self.stats = IngestStats()
        self.chunk_rows: dict[int, list[int]] = {}  # bucket start → [rows in, events out]
        self._writer: SegmentFileWriter | None = None
        self._interval: Interval | None = None
        self._piece = 0

    def write(self, batch: pa.RecordBatch) -> None:
        """Add a batch of :func:`radstack.pipeline.rollup.rollup_rows` rows, in partition order."""
        starts, n = np.unique(batch.column(SEGMENT_START).to_numpy(zero_copy_only=False), return_counts=True)
        for start, k in zip(starts.tolist(), n.tolist(), strict=True):
            self.chunk_rows.setdefault(int(start), [0, 0])[0] += k
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        self._pending_bytes += batch.nbytes
        if self._pending_rows >= ROLLUP_GROUP_ROWS or self._pending_bytes >= ROLLUP_GROUP_BYTES:
            self._roll_pending()

    def _roll_pending(self) -> None:
        """Roll up the gathered batches as one table and pass the finished rows on."""
        if not self._pending:
            return
        table = pa.Table.from_batches(self._pending).combine_chunks()
        self._pending, self._pending_rows, self._pending_bytes = [], 0, 0
        rolled, continues = rollup_sorted(table, self.schema, dedup=self.dedup, previous=self._last_input)
        self._last_input = table.slice(table.num_rows - 1)
        if rolled is None:
            return
        if continues and self._held is not None:
            first = combine(pa.concat_tables([self._held, rolled.slice(0, 1)]), self.schema)
            rolled = pa.concat_tables([first, rolled.slice(1)])
        elif self._held is not None:
            self._emit(self._held)
        # the last row may go on in the next batch: hold it back
        self._held = rolled.slice(rolled.num_rows - 1)
        if rolled.num_rows > 1:
            self._emit(rolled.slice(0, rolled.num_rows - 1))

    def _emit(self, done: pa.Table) -> None:
        st = self.stats
        st.processed += int(pc.sum(done.column(ROWS)).as_py() or 0)
        st.processed_bytes += int(pc.sum(done.column(BYTES)).as_py() or 0)
        st.processed_with_error += int(pc.sum(done.column(ERRORS)).as_py() or 0)
        starts = done.column(SEGMENT_START).to_numpy()
        events = done.column(ROWS).to_numpy(zero_copy_only=False)
        rows = done.select(self.arrow_schema.names)
        for a, b in runs(starts):
            self.chunk_rows.setdefault(int(starts[a]), [0, 0])[1] += int(events[a:b].sum())
            self._append(int(starts[a]), rows.slice(a, b - a))

    def _append(self, start: int, rows: pa.Table) -> None:
        gran = self.schema.segment_granularity
        interval = Interval.eternity() if gran.is_all else gran.bucket(start)
        if interval != self._interval:
            self._finish()
            self._interval, self._piece = interval, 0
        while rows.num_rows:
            if self._writer is not None and self._writer.rows >= self.max_rows:
                self._finish()
                self._piece += 1
            if self._writer is None:
                self._writer = SegmentFileWriter(Path(self.tmp) / f"{len(self.segments)}.parquet")
            room = self.max_rows - self._writer.rows
            self._writer.write(rows.slice(0, room).cast(self.arrow_schema, safe=False))
            rows = rows.slice(room)

    def _finish(self) -> None:
        w, self._writer = self._writer, None
        if w is None or self._interval is None:
            return
        w.close()
        seg = DataSegment(
            data_source=self.schema.data_source,
            interval=self._interval,
            version=self.version,
            dimensions=self.dims,
            metrics=self.schema.metric_names,
            shard_spec=ShardSpec("numbered", self.first + self._piece, 0),
            num_rows=w.rows,
        )
        self.segments.append(store_segment(self.storage, seg, w.path, w.size, self.schema.projections))

    def close(self) -> None:
        self._roll_pending()
        if self._held is not None:
            self._emit(self._held)
            self._held = None
        self._finish()


def write_segments(
    df: DataFrame,
    schema: DataSchema,
    *,
    deep_storage_config: Mapping[str, Any],
    version: str,
    stride: int,
    dedup: bool = False,
    max_rows_per_segment: int = DEFAULT_MAX_ROWS_PER_SEGMENT,
) -> IndexedPartition:
    """Roll up the rows of :func:`radstack.pipeline.rollup.rollup_rows` (with ``dedup``: it was given
    a ``dedup_key``) and write them as segment files of ``version``, on the executors
    (``mapInArrow``: :func:`radstack.pipeline.rollup.rollup_sorted` on each Arrow batch, straight
    into the Parquet writer — no Python per row): Spark partition ``p`` writes one file per segment
    bucket it holds (a new piece every ``max_rows_per_segment`` rows), numbered from ``p * stride``;
    renumber the result into core sets with :func:`radstack.storage.indexer.renumber_core`. Nothing
    is published here."""

    cfg = dict(deep_storage_config)
    schema_ = schema

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext  # lazy: only Spark code paths load pyspark

        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else 0
        with tempfile.TemporaryDirectory(prefix="radstack-write-") as tmp:
            w = _PartitionWriter(schema_, open_deep_storage(cfg), version, pid * stride, max_rows_per_segment, tmp, dedup)
            for b in batches:
                if b.num_rows:
                    w.write(b)
            w.close()
            if len(w.segments) > stride:
                raise ValueError(f"{len(w.segments)} segments from one Spark partition, stride {stride}")
        yield _result_batch(w.segments, w.stats, w.chunk_rows)

    return _collect(df.mapInArrow(run, RESULT_SCHEMA))
