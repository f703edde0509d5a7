"""Compaction as a Spark job (the batch layer's runner for large intervals).

Reads the planned input segments' Parquet files straight from deep storage (``file://``, ``hdfs://``,
``s3a://`` URIs), keeps each file's rows inside the clip where the timeline shows it, conforms them to
one schema (``__time`` as millis, the output dimensions, the metric columns), hash-partitions on the
dimensions (every ``(time bucket, dims)`` group lands in one partition, so rollup is perfect) and hands
each Arrow partition to the shared indexer (:func:`radstack.pipeline.indexing.index_dataframe`,
``mapInArrow``) with the combining aggregators. The partitions become one core set
(:func:`radstack.storage.indexer.renumber_core`). Nothing is published here: :func:`radstack.storage.compaction.run_compaction`
checks totals and publishes.
"""

from __future__ import annotations

import logging
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from batch.storage_conf import storage_spark_conf
from radstack.config import Settings
from radstack.pipeline.indexing import index_dataframe
from radstack.pipeline.spark_session import build_spark_session
from radstack.private_files import private_dir
from radstack.spec import TIME_COLUMN, DataSchema, MetricSpec
from radstack.storage.compaction import compaction_schema, resolve_dimensions
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.indexer import renumber_core
from radstack.storage.segment_format import value_type_of
from radstack.value_sql import sql_type

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from radstack.storage.compaction import CompactionConfig, CompactionPlan
    from radstack.storage.segments import DataSegment

log = logging.getLogger(__name__)

__all__ = ["SparkCompactionOutput", "compact_with_spark", "compaction_spark_session"]

@dataclass
class SparkCompactionOutput:
    segments: list[DataSegment]
    schema: DataSchema
    rows_in: int
    totals_in: dict[str, Any]


def compaction_spark_session(settings: Settings) -> SparkSession:
    """The shared radstack SparkSession (no Kafka jars), with the deep storage's Spark settings."""

    conf = storage_spark_conf(settings.deep_storage, getattr(settings, "jvm_dir", None)) if settings else {}
    return build_spark_session(settings, app_name="radstack-compaction", kafka=False, log_name="compaction",
                               extra_conf=conf)


def _read_inputs(spark: SparkSession, plan: CompactionPlan, deep_storage: DeepStorage) -> list[tuple[DataFrame, int, int]]:
    """One DataFrame per distinct clip (the files visible over the same part of time)."""
    by_clip: dict[tuple[int, int], list[str]] = defaultdict(list)
    for v in plan.inputs:
        key = deep_storage.key_for_load_spec(v.segment.load_spec)
        by_clip[(v.interval.start, v.interval.end)].append(deep_storage.uri(key))
    return [(spark.read.parquet(*uris), lo, hi) for (lo, hi), uris in sorted(by_clip.items())]


def _array_marks(plan: CompactionPlan, deep_storage: DeepStorage, settings: Settings) -> dict[str, pa.Field]:
    """The ARRAY<STRING> columns of the inputs (Spark reads them as plain string arrays, the same as
    multi-value dimensions: the mark is in the Arrow schema of the file), from the smallest input's
    file footer; needed only when the output dimensions are not declared."""
    smallest = min(plan.inputs, key=lambda v: v.segment.size)
    key = deep_storage.key_for_load_spec(smallest.segment.load_spec)
    tmp_parent = private_dir(Path(settings.home) / "tmp")
    with tempfile.TemporaryDirectory(prefix="radstack-schema-", dir=tmp_parent) as tmp:
        local = Path(tmp) / "data.parquet"
        deep_storage.download(key, local)
        schema = pq.read_schema(local)
    return {f.name: f for f in schema if value_type_of(f).startswith("array<")}


def _conform(df: DataFrame, lo: int, hi: int, dims: Sequence[tuple[str, str]],
             metric_specs: Sequence[MetricSpec]) -> DataFrame:
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    t = df.schema[TIME_COLUMN].dataType.simpleString()
    if t.startswith("timestamp"):
        millis = F.unix_millis(F.col(TIME_COLUMN).cast("timestamp"))  # NTZ read as UTC (session zone)
    else:
        millis = F.col(TIME_COLUMN).cast("bigint")
    cols = [millis.alias(TIME_COLUMN)]
    present = set(df.columns)
    for name, typ in dims:
        src = F.col(f"`{name}`") if name in present else F.lit(None)
        cols.append(src.cast(sql_type(typ, "spark")).alias(name))
    for m in metric_specs:
        src = F.col(f"`{m.name}`") if m.name in present else F.lit(None)
        cols.append(src.cast(sql_type(m.value_type, "spark")).alias(m.name))
    out = df.select(*cols)
    return out.where((F.col(TIME_COLUMN) >= F.lit(lo)) & (F.col(TIME_COLUMN) < F.lit(hi)))


def _totals(df: DataFrame, metric_specs: Sequence[MetricSpec]) -> tuple[int, dict[str, Any]]:
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    aggs = [F.count(F.lit(1)).alias("__rows")]
    for i, m in enumerate(metric_specs):
        if m.sketch is not None:  # sketches have no total to compare
            aggs.append(F.lit(None).alias(f"__m{i}"))
            continue
        fn = {"sum": F.sum, "count": F.sum, "min": F.min, "max": F.max}[m.kind]
        aggs.append(fn(F.col(f"`{m.name}`")).alias(f"__m{i}"))
    row = df.agg(*aggs).collect()[0]
    totals: dict[str, Any] = {}
    for i, m in enumerate(metric_specs):
        v = row[f"__m{i}"]
        totals[m.name] = None if v is None else (int(v) if m.value_type == "long" else float(v))
    return int(row["__rows"]), totals


def compact_with_spark(
    plan: CompactionPlan,
    config: CompactionConfig,
    metric_specs: Sequence[MetricSpec],
    *,
    deep_storage: DeepStorage,
    settings: Settings,
    version: str,
    rollup: bool = True,
    spark: SparkSession | None = None,
    partitions: int | None = None,
) -> SparkCompactionOutput:
    """Re-roll ``plan``'s inputs with Spark; returns the written (unpublished) segments."""


    spark = spark or compaction_spark_session(settings)
    frames = _read_inputs(spark, plan, deep_storage)
    arrow_types: dict[str, Any] = {}

    for df, _lo, _hi in frames:
        for f in df.schema.fields:
            t = f.dataType.simpleString()
            arrow_types.setdefault(f.name, {"bigint": pa.int64(), "int": pa.int64(), "float": pa.float32(),
                                            "double": pa.float64(), "array<string>": pa.list_(pa.string()),
                                            "array<bigint>": pa.list_(pa.int64()),
                                            "array<double>": pa.list_(pa.float64())}.get(t, pa.string()))
    input_segments = [v.segment for v in plan.inputs]
    if any(t == pa.list_(pa.string()) for t in arrow_types.values()):
        arrow_types.update(_array_marks(plan, deep_storage, settings))
    dims = resolve_dimensions(config, settings, input_segments, arrow_types)
    schema = compaction_schema(config, plan.tier, metric_specs, dims, rollup=rollup, settings=settings)
    combined = reduce(lambda a, b: a.unionByName(b), [_conform(df, lo, hi, dims, metric_specs) for df, lo, hi in frames])
    rows_in, totals_in = _totals(combined, metric_specs)
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    n = partitions or int(settings.spark.shuffle_partitions if settings else 4)
    keys = [F.col(f"`{d}`") for d, _t in dims] or [F.col(TIME_COLUMN)]
    parted = combined.repartition(max(1, n), *keys)
    stride = 1 + rows_in // max(1, config.max_rows_per_segment)
    indexed = index_dataframe(parted, schema, deep_storage_config=dict(settings.deep_storage), version=version,
                              shard="core", stride=stride)
    segments = renumber_core(indexed.segments, deep_storage)
    log.info("spark compaction %s %s: %d rows → %d segment(s)", plan.data_source, plan.interval.iso(), rows_in,
             len(segments))
    return SparkCompactionOutput(segments, schema, rows_in, totals_in)
