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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from radstack.intervals import Interval, format_instant
from radstack.spec import TIME_COLUMN, DataSchema, TimestampSpec
from radstack.storage.deep_storage import open_deep_storage
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.indexer import IngestStats, bucket_starts, index_partition
from radstack.storage.segments import DataSegment

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from radstack.storage.indexer import IngestStats
    from radstack.storage.segments import DataSegment

__all__ = [
    "RESULT_SCHEMA",
    "IndexedPartition",
    "indexer_schema",
    "interval_start_version",
    "index_dataframe",
    "index_table",
]

RESULT_SCHEMA = "segment STRING, processed BIGINT, processed_bytes BIGINT, unparseable BIGINT, thrown_away BIGINT, filtered BIGINT, processed_with_error BIGINT"


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
    starts = bucket_starts(np.where(valid, times, 0).astype(np.int64), gran)
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
        st = res.stats
        segs = [json.dumps(s.to_json()) for s in res.segments] or [None]
        n = len(segs)
        first = [1] + [0] * (n - 1)  # the stats ride on the first row only
        yield pa.RecordBatch.from_pydict(
            {
                "segment": segs,
                "processed": [st.processed * f for f in first],
                "processed_bytes": [st.processed_bytes * f for f in first],
                "unparseable": [st.unparseable * f for f in first],
                "thrown_away": [st.thrown_away * f for f in first],
                "filtered": [st.filtered * f for f in first],
                "processed_with_error": [st.processed_with_error * f for f in first],
            },
            schema=pa.schema(
                [("segment", pa.string())]
                + [(c, pa.int64()) for c in ("processed", "processed_bytes", "unparseable", "thrown_away",
                                              "filtered", "processed_with_error")]  # fmt: skip
            ),
        )

    rows = df.mapInArrow(run, RESULT_SCHEMA).collect()
    stats = IngestStats()
    segments: list[DataSegment] = []
    for r in rows:
        if r["segment"]:
            segments.append(DataSegment.from_json(json.loads(r["segment"])))
        stats.processed += r["processed"]
        stats.processed_bytes += r["processed_bytes"]
        stats.unparseable += r["unparseable"]
        stats.thrown_away += r["thrown_away"]
        stats.filtered += r["filtered"]
        stats.processed_with_error += r["processed_with_error"]
    return IndexedPartition(segments, stats)
