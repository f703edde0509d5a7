"""Rollup for jobs that index many rows at once (the batch rebuild), with no Python per row.

The indexer's steps 4–6 (:mod:`radstack.storage.indexer`), split between Spark and the executors'
Arrow batches:

1. :func:`rollup_rows` (Spark Column expressions): cast each dimension and metric input to its
   declared type (as the indexer converts values; a value that does not convert becomes NULL and
   counts as *processed with error*); ``__time`` truncated to ``queryGranularity`` and the row's
   segment bucket (``segmentGranularity``) — :func:`radstack.time.floor.granularity_floor_sql`, or
   the indexer's own vectorised bucketing in an Arrow UDF for the few zoned periods Spark SQL cannot
   floor;
2. **one shuffle**: rows hash-partitioned on the rollup key (``__time`` + dimensions), so a rolled-up
   row is built in exactly one partition (perfect rollup) and every copy of an event — a re-send has
   the same time and dimensions — meets its original there; then one sort per partition (key, event
   id — ``__time`` first, so the segment buckets come in order too), which Spark spills to disk when
   it must;
3. :func:`rollup_sorted` (numpy/pyarrow over each Arrow batch, in the segment writer): drop the
   copies of an event (adjacent rows with the same key and event id) and combine each run of equal
   keys into one row — metrics by their aggregators, ``count`` counting rows.

A Spark ``dropDuplicates`` + ``groupBy`` on the same partitioning gives the same rows without a
second shuffle, but costs four hash aggregations where the sorted runs need none (measured in
docs/benchmarks.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from radstack.expressions import expression_to_sql
from radstack.pipeline.parse import BYTES_COLUMN, q
from radstack.pipeline.transform import druid_types
from radstack.sketches import aggregate
from radstack.spec import TIME_COLUMN, DataSchema, MetricSpec
from radstack.sql_text import ExpressionError
from radstack.storage.segment_format import arrow_type
from radstack.time.floor import floor_millis, granularity_floor_sql
from radstack.time.granularity import Granularity
from radstack.value_sql import (
    array_sql,
    json_text_sql,
    multi_value_sql,
    numeric_cast_sql,
    sql_type,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["SEGMENT_START", "ROWS", "BYTES", "ERRORS", "DEDUP", "rollup_rows", "rollup_sorted"]

SEGMENT_START = "__segment_start"
"""Start millis of the row's segment bucket (not written to the segment file)."""
ROWS = "__rows"
"""Input rows behind a segment row (stats: ``processed``)."""
BYTES = BYTES_COLUMN
"""Raw input bytes behind a segment row, when the pipeline kept them (stats: ``processedBytes``)."""
ERRORS = "__errors"
"""Input rows with a value that did not convert (stats: ``processedWithError``)."""
DEDUP = "__dedup"
"""The event id, when copies of an event are still to be dropped."""

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
        out = floor_millis(np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.int64), gran)
        return pa.array(out, pa.int64()).to_pandas()

    return pandas_udf(floor, "bigint")


def _cast(expr: str, src: str, target: str) -> tuple[str, bool]:
    """Spark SQL casting ``expr`` (Druid type ``src``) to ``target``; True when a value can fail to
    convert (so it counts as an error)."""
    if target == "json":
        return json_text_sql(expr, src, "spark"), False
    if target == "string":
        return f"CAST({expr} AS STRING)", False
    return numeric_cast_sql(expr, src, target, "spark"), src == "STRING"


def rollup_rows(
    df: DataFrame,
    schema: DataSchema,
    *,
    partitions: int,
    dedup_key: str | None = None,
) -> DataFrame:
    """Pipeline rows (``__time`` BIGINT millis, the dimensions, the metrics' inputs, optionally
    ``dedup_key`` and :data:`BYTES`) → rows ready for :func:`rollup_sorted`: ``__time`` (floored),
    the dimensions in segment order and types, each non-``count`` metric's input (typed, named as
    the metric), :data:`DEDUP` (with ``dedup_key``), :data:`SEGMENT_START`, :data:`BYTES`,
    :data:`ERRORS`; hash-partitioned into ``partitions`` on the rollup key (the one shuffle) and
    sorted in each by key (``__time`` first, so by segment bucket too) and event id, so copies and
    groups are adjacent."""
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    types = druid_types(df)
    present = set(df.columns)
    dims = schema.resolve_dimensions([c for c in df.columns if c != TIME_COLUMN])
    dim_names = [d.name for d in dims]

    cols: list[Column] = [F.col(TIME_COLUMN).cast("bigint").alias(TIME_COLUMN)]
    errors: list[str] = []
    for d in dims:
        if d.name not in present:
            cols.append(F.lit(None).cast(sql_type(d.value_type, 'spark')).alias(d.name))
            continue
        if d.multi_value_handling:
            cols.append(F.expr(multi_value_sql(q(d.name), types[d.name], d.multi_value_handling, "spark")).alias(d.name))
            continue
        if d.is_array:
            cols.append(F.expr(array_sql(q(d.name), types[d.name], d.type, "spark")).alias(d.name))
            continue
        sql, can_fail = _cast(q(d.name), types[d.name], d.type)
        cols.append(F.expr(sql).alias(d.name))
        if can_fail:
            errors.append(f"({q(d.name)} IS NOT NULL AND {sql} IS NULL)")
    metric_inputs: dict[str, str] = {}
    by_sql: dict[str, str] = {}
    for i, m in enumerate(schema.metrics):
        if m.type == "count":
            continue
        alias = f"__m{i}"
        if m.sketch is not None:  # the input as the sketch reads it; the sketch is built per group
            if m.field_name not in present:
                sql = "CAST(NULL AS STRING)"
            elif m.sketch.family == "quantilesDoublesSketch" and not m.merges_sketches:
                sql = f"try_cast({q(m.field_name or '')} AS DOUBLE)"
            else:
                sql = q(m.field_name or "")
            cols.append(F.expr(sql).alias(alias))
            metric_inputs[m.name] = alias
            continue
        if m.expression is not None:
            raw = expression_to_sql(m.expression, dialect="spark", column_types=types)
            sql = f"try_cast(({raw}) AS {sql_type(m.value_type, 'spark')})"
        elif m.field_name in present:
            sql, can_fail = _cast(q(m.field_name), types[m.field_name], m.value_type)
            if can_fail:
                errors.append(f"({q(m.field_name)} IS NOT NULL AND {sql} IS NULL)")
        else:
            sql = f"CAST(NULL AS {sql_type(m.value_type, 'spark')})"
        if sql in by_sql:  # doubleSum and doubleMax of one field: shuffle the input once
            metric_inputs[m.name] = by_sql[sql]
            continue
        cols.append(F.expr(sql).alias(alias))
        metric_inputs[m.name] = by_sql[sql] = alias
    if dedup_key:
        cols.append(F.col(q(dedup_key)).alias(DEDUP))
    cols.append((F.col(BYTES) if BYTES in present else F.lit(0)).cast("bigint").alias(BYTES))
    cols.append(F.expr(" OR ".join(errors) if errors else "false").cast("int").alias(ERRORS))
    rows = _floor(df.select(*cols), TIME_COLUMN, TIME_COLUMN, schema.query_granularity)

    key = [F.col(TIME_COLUMN), *[F.col(q(n)) for n in dim_names]]
    rows = rows.repartition(max(1, int(partitions)), *key)
    rows = _floor(rows, TIME_COLUMN, SEGMENT_START, schema.segment_granularity)
    out = [F.col(TIME_COLUMN), *[F.col(q(n)) for n in dim_names]]
    out += [F.col(metric_inputs[m.name]).alias(m.name) for m in schema.metrics if m.type != "count"]
    out += [F.col(c) for c in ([DEDUP] if dedup_key else [])] + [F.col(SEGMENT_START), F.col(BYTES), F.col(ERRORS)]
    # by __time first: a floor is monotone, so the segment buckets come in order too, and Spark's sort
    # prefix (the first key) then tells most rows apart without comparing whole rows
    sort = [F.col(TIME_COLUMN).asc(), *[F.col(q(n)).asc_nulls_first() for n in dim_names]]
    return rows.select(*out).sortWithinPartitions(*sort, *([F.col(DEDUP).asc()] if dedup_key else []))


# ---- the vectorised rollup of sorted rows (runs on the executors, in the segment writer) ------------


def _list_keys(arr: pa.Array) -> pa.Array:
    """One string per list that is equal exactly when the lists are: its elements as text, each
    marked as a value or a NULL, joined; an empty list gives "" and a NULL list NULL."""
    lengths = pc.fill_null(pc.list_value_length(arr), 0).cast(pa.int32())
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths.to_numpy(zero_copy_only=False))]), pa.int32())
    text = pc.cast(pc.list_flatten(arr), pa.string())
    marked = pc.fill_null(pc.binary_join_element_wise("v", text, ""), "n")
    keys = pa.ListArray.from_arrays(offsets, marked, mask=pc.is_null(arr))
    return pc.binary_join(keys, "\x00")


def _same_as_previous(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """``out[i]``: row ``i`` equals row ``i - 1`` (NULL equals NULL); ``out[0]`` is False."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):  # multi-value values or an ARRAY
        arr = _list_keys(arr)
    n = len(arr)
    out = np.zeros(n, dtype=bool)
    if n < 2:
        return out
    a, b = arr.slice(1), arr.slice(0, n - 1)
    eq = pc.fill_null(pc.equal(a, b), False)
    if arr.null_count:
        eq = pc.or_(eq, pc.and_(pc.is_null(a), pc.is_null(b)))
    out[1:] = eq.to_numpy(zero_copy_only=False)
    return out


def _reduce(values: pa.Array, starts: np.ndarray, kind: str, value_type: str) -> pa.Array:
    """Combine each group (``starts``: first row of each) of ``values`` by ``kind`` (sum/min/max);
    NULLs are skipped, a group of NULLs gives NULL, as SQL aggregates do."""
    valid = pc.is_valid(values).to_numpy(zero_copy_only=False)
    counts = np.add.reduceat(valid.astype(np.int64), starts)
    is_int = value_type == "long"
    if kind == "sum":
        fill: float | int = 0
    elif kind == "min":
        fill = np.iinfo(np.int64).max if is_int else np.inf
    else:
        fill = np.iinfo(np.int64).min if is_int else -np.inf
    filled = pc.fill_null(values.cast(pa.int64() if is_int else pa.float64()), fill).to_numpy(zero_copy_only=False)
    ufunc = {"sum": np.add, "min": np.minimum, "max": np.maximum}[kind]
    out = ufunc.reduceat(filled, starts)
    return pa.array(out, mask=counts == 0).cast(arrow_type(value_type))


def rollup_sorted(
    table: pa.Table, schema: DataSchema, *, dedup: bool, previous: pa.Table | None = None
) -> tuple[pa.Table | None, bool]:
    """Dedup and roll up rows of :func:`rollup_rows` (one partition's, in its order), vectorised.

    Copies of an event (same rollup key and :data:`DEDUP`) are adjacent: all but the first go. With
    ``rollup``, each run of equal (``__time``, dimensions) becomes one row, metrics combined by their
    aggregators and ``count`` counting rows. ``previous``: the last input row of the batch before,
    so a run (or a copy) that crosses the batch boundary is seen.

    Returns the rolled-up rows — ``__time``, dimensions, metrics, then :data:`SEGMENT_START`,
    :data:`ROWS`, :data:`BYTES`, :data:`ERRORS` (None when every row was a copy) — and whether the
    first of them continues the previous batch's last key (combine the two with :func:`combine`)."""
    dims = [d.name for d in schema.resolve_dimensions(())]
    if previous is not None:
        table = pa.concat_tables([previous.select(table.column_names), table])
    n = table.num_rows
    same_key = np.ones(n, dtype=bool)
    for c in [TIME_COLUMN, *dims]:
        same_key &= _same_as_previous(table.column(c))
    same_key[:1] = False
    drop = np.zeros(n, dtype=bool)
    if dedup:
        drop = same_key & _same_as_previous(table.column(DEDUP))
    continues = False
    if previous is not None:
        drop[0] = True  # only there to compare with
        kept = np.flatnonzero(~drop)
        continues = bool(schema.rollup and len(kept) and same_key[kept[0]])
    if drop.any():
        table = table.filter(pa.array(~drop))
        same_key = same_key[~drop]
        if len(same_key):
            same_key[0] = False
    n = table.num_rows
    if n == 0:
        return None, False
    starts = np.flatnonzero(~same_key) if schema.rollup else np.arange(n)
    return _aggregate(table, schema, dims, starts, counts=None), continues


def _sketches(values: pa.ChunkedArray, starts: np.ndarray, m: MetricSpec, *, rolled_input: bool,
              rolled: bool) -> pa.Array:
    """One sketch per group (``starts``): built from the input values, or merged when the rows hold
    sketches already (``rolled_input``, or a metric that merges sketches); one per row without rollup."""
    assert m.sketch is not None
    vals = values.to_pylist()
    merge = rolled_input or m.merges_sketches or pa.types.is_binary(values.type)
    if not rolled and not rolled_input:
        groups = [[v] for v in vals]
    else:
        bounds = np.append(starts, len(vals)).tolist()
        groups = [vals[s:e] for s, e in zip(bounds[:-1], bounds[1:], strict=True)]
    return pa.array([aggregate(m.sketch, g, sketches=merge) for g in groups], pa.binary())


def combine(rows: pa.Table, schema: DataSchema) -> pa.Table:
    """One row from rolled-up rows of the same key (a run split over two batches)."""
    dims = [d.name for d in schema.resolve_dimensions(())]
    return _aggregate(rows, schema, dims, np.array([0]), counts=rows.column(ROWS))


def _aggregate(table: pa.Table, schema: DataSchema, dims: list[str], starts: np.ndarray,
               counts: pa.ChunkedArray | None) -> pa.Table:  # fmt: skip
    """Rows ``starts[i]`` … ``starts[i+1] - 1`` → one row each. ``counts``: the rows are already
    rolled up (``count`` metrics and :data:`ROWS` are summed, not counted)."""
    firsts = table.take(pa.array(starts))
    if counts is None:
        sizes = pa.array(np.diff(np.append(starts, table.num_rows)), pa.int64())
    else:
        sizes = _reduce(counts.combine_chunks(), starts, "sum", "long")
    rolled = schema.rollup
    cols: dict[str, pa.Array | pa.ChunkedArray] = {TIME_COLUMN: firsts.column(TIME_COLUMN)}
    for d in dims:
        cols[d] = firsts.column(d)
    for m in schema.metrics:
        if m.sketch is not None:
            cols[m.name] = _sketches(table.column(m.name), starts, m, rolled_input=counts is not None, rolled=rolled)
        elif m.type == "count" and counts is None:
            cols[m.name] = sizes.cast(arrow_type(m.value_type))
        elif rolled:
            kind = "sum" if m.type == "count" else m.kind
            cols[m.name] = _reduce(table.column(m.name).combine_chunks(), starts, kind, m.value_type)
        else:
            cols[m.name] = table.column(m.name).cast(arrow_type(m.value_type))
    cols[SEGMENT_START] = firsts.column(SEGMENT_START)
    cols[ROWS] = sizes
    for c in (BYTES, ERRORS):
        cols[c] = _reduce(table.column(c).combine_chunks(), starts, "sum", "long") if rolled else table.column(c)
    return pa.table(cols)
