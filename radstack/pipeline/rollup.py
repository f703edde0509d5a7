"""Rollup in Spark: pipeline rows → segment rows, partitioned and sorted, with no Python per row.

This is the indexer's steps 4–6 (:mod:`radstack.storage.indexer`) as Spark Column expressions, for
jobs that index many rows at once (the batch rebuild):

1. cast each dimension and metric input to its declared type (as the indexer converts values; a
   value that does not convert becomes NULL and counts as *processed with error*);
2. ``__time`` truncated to ``queryGranularity`` and the row's segment bucket (``segmentGranularity``)
   — :func:`radstack.expressions.granularity_floor_sql`, or the indexer's own vectorised bucketing
   in an Arrow UDF for the few zoned periods Spark SQL cannot floor;
3. **one shuffle**: rows hash-partitioned on the rollup key (``__time`` + dimensions), so a rolled-up
   row is built in exactly one partition (perfect rollup) and every copy of an event — a re-send has
   the same time and dimensions — meets its original there; ``dedup_key`` (the event id) drops the
   copies in that same partition, without a shuffle of its own;
4. rollup (``groupBy(__time, dims)``, metrics combined by their aggregators, ``count`` counting rows)
   when ``rollup`` is true;
5. sorted within each partition by segment bucket, ``__time``, then the dimensions (NULLs first).

The result feeds :func:`radstack.pipeline.segments.write_segments`, which writes each partition's
rows of each segment bucket as one segment file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from radstack.expressions import ExpressionError, expression_to_sql, granularity_floor_sql
from radstack.granularity import Granularity
from radstack.pipeline.parse import BYTES_COLUMN, convert_sql, q
from radstack.pipeline.transform import druid_types
from radstack.spec import TIME_COLUMN, DataSchema
from radstack.storage.indexer import bucket_starts

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["SEGMENT_START", "ROWS", "BYTES", "ERRORS", "rollup_rows"]

SEGMENT_START = "__segment_start"
"""Start millis of the row's segment bucket (not written to the segment file)."""
ROWS = "__rows"
"""Input rows behind a segment row (stats: ``processed``)."""
BYTES = BYTES_COLUMN
"""Raw input bytes behind a segment row, when the pipeline kept them (stats: ``processedBytes``)."""
ERRORS = "__errors"
"""Input rows with a value that did not convert (stats: ``processedWithError``)."""

_SPARK_TYPES = {"long": "BIGINT", "float": "FLOAT", "double": "DOUBLE", "string": "STRING"}


def _floor(df: DataFrame, src: str, dst: str, gran: Granularity) -> DataFrame:
    """``df`` with ``dst`` = ``src`` floored to ``gran`` (BIGINT)."""
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    if gran.is_none:
        return df.withColumn(dst, F.col(q(src)))
    try:
        sql = granularity_floor_sql(gran, q(src), dialect="spark")
    except ExpressionError:
        return df.withColumn(dst, _bucket_udf(gran)(F.col(q(src))))
    return df.withColumn(dst, F.expr(sql).cast("bigint"))


def _bucket_udf(gran: Granularity):  # type: ignore[no-untyped-def]
    """An Arrow UDF flooring millis with the indexer's vectorised bucketing."""
    from pyspark.sql.functions import pandas_udf  # lazy: only Spark code paths load pyspark

    def floor(s):  # type: ignore[no-untyped-def]  # pandas Series of int64 millis in and out
        arr = pa.array(s, type=pa.int64(), from_pandas=True)
        out = bucket_starts(np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.int64), gran)
        return pa.array(out, pa.int64()).to_pandas()

    return pandas_udf(floor, "bigint")


def _cast(expr: str, src: str, target: str) -> tuple[str, bool]:
    """Spark SQL casting ``expr`` (Druid type ``src``) to ``target``; True when a value can fail to
    convert (so it counts as an error)."""
    if target == "string":
        return f"CAST({expr} AS STRING)", False
    if src == "STRING":
        return convert_sql(expr, target), True
    if target == "long" and src == "DOUBLE":
        return f"try_cast({expr} AS BIGINT)", False
    return f"try_cast({expr} AS {_SPARK_TYPES[target]})", False


def rollup_rows(
    df: DataFrame,
    schema: DataSchema,
    *,
    partitions: int,
    dedup_key: str | None = None,
) -> DataFrame:
    """Pipeline rows (``__time`` BIGINT millis, the dimensions, the metrics' inputs, optionally
    ``dedup_key`` and :data:`BYTES`) → segment rows: ``__time`` (floored), the dimensions and metrics
    in segment order and types, then :data:`SEGMENT_START`, :data:`ROWS`, :data:`BYTES`,
    :data:`ERRORS`; hash-partitioned into ``partitions`` on the rollup key and sorted in each."""
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    types = druid_types(df)
    present = set(df.columns)
    dims = schema.resolve_dimensions([c for c in df.columns if c != TIME_COLUMN])
    dim_names = [d.name for d in dims]

    cols: list[Column] = [F.col(TIME_COLUMN).cast("bigint").alias(TIME_COLUMN)]
    errors: list[str] = []
    for d in dims:
        if d.name not in present:
            cols.append(F.lit(None).cast(_SPARK_TYPES[d.type]).alias(d.name))
            continue
        sql, can_fail = _cast(q(d.name), types[d.name], d.type)
        cols.append(F.expr(sql).alias(d.name))
        if can_fail:
            errors.append(f"({q(d.name)} IS NOT NULL AND {sql} IS NULL)")
    metric_inputs: dict[str, str] = {}
    for i, m in enumerate(schema.metrics):
        if m.type == "count":
            continue
        alias = f"__m{i}"
        if m.expression is not None:
            raw = expression_to_sql(m.expression, dialect="spark", column_types=types)
            sql = f"try_cast(({raw}) AS {_SPARK_TYPES[m.value_type]})"
        elif m.field_name in present:
            sql, can_fail = _cast(q(m.field_name), types[m.field_name], m.value_type)
            if can_fail:
                errors.append(f"({q(m.field_name)} IS NOT NULL AND {sql} IS NULL)")
        else:
            sql = f"CAST(NULL AS {_SPARK_TYPES[m.value_type]})"
        cols.append(F.expr(sql).alias(alias))
        metric_inputs[m.name] = alias
    if dedup_key:
        cols.append(F.col(q(dedup_key)).alias("__dedup"))
    cols.append((F.col(BYTES) if BYTES in present else F.lit(0)).cast("bigint").alias(BYTES))
    cols.append(F.expr(" OR ".join(errors) if errors else "false").cast("int").alias(ERRORS))
    rows = _floor(df.select(*cols), TIME_COLUMN, TIME_COLUMN, schema.query_granularity)

    key = [F.col(TIME_COLUMN), *[F.col(q(n)) for n in dim_names]]
    rows = rows.repartition(max(1, int(partitions)), *key)
    if dedup_key:
        # the partitioning already clusters (__dedup, __time, dims): Spark adds no second shuffle
        rows = rows.dropDuplicates(["__dedup", TIME_COLUMN, *dim_names]).drop("__dedup")

    if schema.rollup:
        aggs: list[Column] = []
        for m in schema.metrics:
            t = _SPARK_TYPES[m.value_type]
            if m.type == "count":
                aggs.append(F.count(F.lit(1)).cast(t).alias(m.name))
            else:
                fn = {"sum": F.sum, "min": F.min, "max": F.max}[m.kind]
                aggs.append(fn(F.col(metric_inputs[m.name])).cast(t).alias(m.name))
        aggs += [F.count(F.lit(1)).alias(ROWS), F.sum(BYTES).alias(BYTES), F.sum(ERRORS).cast("bigint").alias(ERRORS)]
        rows = rows.groupBy(*key).agg(*aggs)
    else:
        out: list[Column] = [*key]
        for m in schema.metrics:
            t = _SPARK_TYPES[m.value_type]
            val = F.lit(1) if m.type == "count" else F.col(metric_inputs[m.name])
            out.append(val.cast(t).alias(m.name))
        out += [F.lit(1).cast("bigint").alias(ROWS), F.col(BYTES), F.col(ERRORS).cast("bigint").alias(ERRORS)]
        rows = rows.select(*out)

    rows = _floor(rows, TIME_COLUMN, SEGMENT_START, schema.segment_granularity)
    ordered = [TIME_COLUMN, *dim_names, *schema.metric_names, SEGMENT_START, ROWS, BYTES, ERRORS]
    rows = rows.select(*[F.col(q(c)) for c in ordered])
    sort = [F.col(SEGMENT_START).asc(), F.col(TIME_COLUMN).asc(), *[F.col(q(n)).asc_nulls_first() for n in dim_names]]
    return rows.sortWithinPartitions(*sort)
