"""Druid granularities as DuckDB expressions over the ``__time`` TIMESTAMP column.

:func:`bucket_sql` gives a BIGINT expression (epoch millis of the bucket start) that matches
:meth:`radstack.time.granularity.Granularity.bucket_start`, rendered by :mod:`radstack.time.floor`;
the rare forms it cannot say in SQL use a vectorised Python UDF.
:func:`format_bucket` renders a bucket start as Druid does: ``…Z`` in UTC, with the zone's offset for
period granularities in another zone (``2026-01-01T00:00:00.000-08:00``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from radstack.sql_text import ExpressionError
from radstack.time.floor import floor_millis, timestamp_bucket_millis_sql, timestamp_bucket_sql
from radstack.time.granularity import Granularity
from radstack.time.intervals import Interval, format_instant
from radstack.time.joda import format_millis
from radstack.time.sql import is_utc_zone

TIME_MS = 'epoch_ms("__time")'


def bucket_sql(g: Granularity, cursor: duckdb.DuckDBPyConnection | None = None) -> str | None:
    """BIGINT SQL for the bucket start of each row; None for ``all`` (one bucket)."""
    if g.kind == "all":
        return None
    try:
        return timestamp_bucket_millis_sql(g, '"__time"')
    except ExpressionError:
        return _udf_bucket(g, cursor)


def bucket_timestamp_sql(g: Granularity) -> str | None:
    """TIMESTAMP SQL for the bucket start of each row where DuckDB truncates to it (group by it, then
    ``epoch_ms``); None for ``all`` and for buckets :func:`bucket_sql` computes otherwise."""
    return None if g.kind == "all" else timestamp_bucket_sql(g, '"__time"')


def _udf_bucket(g: Granularity, cursor: duckdb.DuckDBPyConnection | None) -> str:
    if cursor is None:
        raise ValueError("this granularity needs a cursor to register its bucketing function")
    name = "__rs_bucket_" + hashlib.sha1(repr(g).encode()).hexdigest()[:12]

    def fn(values: pa.Array) -> pa.Array:  # radstack.time.floor.floor_millis: vectorised, the indexer's bucketing
        starts = floor_millis(pc.fill_null(values, 0).to_numpy(zero_copy_only=False), g)
        return pa.array(starts, type=pa.int64(), mask=values.is_null().to_numpy(zero_copy_only=False))

    try:
        cursor.create_function(name, fn, ["BIGINT"], "BIGINT", type="arrow")  # type: ignore[arg-type]
    except duckdb.Error as e:
        if "already" not in str(e):  # registered on this cursor by an earlier query
            raise
    return f"{name}({TIME_MS})"


def format_bucket(ms: int, g: Granularity) -> str:
    """A bucket start as Druid renders it (zone offset for non-UTC period granularities)."""
    if g.kind == "period" and not is_utc_zone(g.time_zone):
        return format_millis(ms, None, g.time_zone)
    return format_instant(ms)


def fill_buckets(g: Granularity, ranges: Iterable[Interval], cap: int = 200_000) -> list[int] | None:
    """Every bucket start overlapping ``ranges`` (Druid zero-fills those); None if over ``cap``."""
    seen: set[int] = set()
    for r in ranges:
        if r.start >= r.end:
            continue
        if g.kind != "all" and g.approx_millis() > 0 and (r.end - r.start) // g.approx_millis() > cap:
            return None
        for b in g.iterate(r):
            seen.add(b.start)
            if len(seen) > cap:
                return None
    return sorted(seen)
