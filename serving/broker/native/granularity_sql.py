"""Druid granularities as DuckDB expressions over the ``__time`` TIMESTAMP column.

:func:`bucket_sql` gives a BIGINT expression (epoch millis of the bucket start) that matches
:meth:`radstack.time.granularity.Granularity.bucket_start`: simple UTC granularities become integer
arithmetic, period granularities truncate the wall clock in their time zone with DuckDB's ICU
functions, and the rare remaining forms (calendar periods with an origin) use a vectorised Python UDF.
:func:`format_bucket` renders a bucket start as Druid does: ``…Z`` in UTC, with the zone's offset for
period granularities in another zone (``2026-01-01T00:00:00.000-08:00``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import duckdb
import pyarrow as pa

from radstack.time.granularity import Granularity
from radstack.time.intervals import Interval, format_instant
from radstack.time.joda import format_millis

TIME_MS = 'epoch_ms("__time")'


def _floor_to(expr: str, step: int, origin: int = 0) -> str:
    shifted = f"({expr} - {origin})" if origin else expr
    floored = f"({shifted} - ((({shifted} % {step}) + {step}) % {step}))"
    return f"({floored} + {origin})" if origin else floored


def _is_utc(g: Granularity) -> bool:
    return g.time_zone.upper() in ("UTC", "Z", "ETC/UTC")


def bucket_sql(g: Granularity, cursor: duckdb.DuckDBPyConnection | None = None) -> str | None:
    """BIGINT SQL for the bucket start of each row; None for ``all`` (one bucket)."""
    if g.kind == "all":
        return None
    if g.kind == "none":
        return TIME_MS
    if g.kind == "duration":
        assert g.duration is not None
        return _floor_to(TIME_MS, g.duration, g.origin or 0)
    p = g.period
    assert p is not None
    fixed = not p.is_calendar and not p.weeks and not p.days
    if g.origin is not None:
        if fixed and p.fixed_millis > 0:
            return _floor_to(TIME_MS, p.fixed_millis, g.origin)
        return _udf_bucket(g, cursor)
    if _is_utc(g) and fixed and p.fixed_millis > 0 and 86_400_000 % p.fixed_millis == 0:
        return _floor_to(TIME_MS, p.fixed_millis)
    if _is_utc(g) and p.days == 1 and not (p.is_calendar or p.weeks or p.hours or p.minutes or p.millis):
        return _floor_to(TIME_MS, 86_400_000)
    local = '"__time"' if _is_utc(g) else f"timezone('{g.time_zone}', timezone('UTC', \"__time\"))"
    trunc = _truncate_local(g, local)
    if trunc is None:
        return _udf_bucket(g, cursor)
    if _is_utc(g):
        return f"epoch_ms({trunc})"
    return f"epoch_ms(timezone('{g.time_zone}', {trunc}))"


def _truncate_local(g: Granularity, t: str) -> str | None:
    """Floor the most significant field of the period (Druid's PeriodGranularity.truncate)."""
    p = g.period
    assert p is not None
    if p.years:
        n = p.years
        return f"make_timestamp(year({t}) - (year({t}) % {n}), 1, 1, 0, 0, 0)"
    if p.months:
        n = p.months
        return f"make_timestamp(year({t}), (month({t}) - 1) - ((month({t}) - 1) % {n}) + 1, 1, 0, 0, 0)"
    if p.weeks:
        if p.weeks == 1:
            return f"date_trunc('week', {t})"
        return f"(date_trunc('week', {t}) - to_days(CAST(((week({t}) - 1) % {p.weeks}) * 7 AS INTEGER)))"
    if p.days:
        if p.days == 1:
            return f"date_trunc('day', {t})"
        return f"(date_trunc('day', {t}) - to_days(CAST((day({t}) - 1) % {p.days} AS INTEGER)))"
    if p.hours:
        return f"(date_trunc('hour', {t}) - to_hours(CAST(hour({t}) % {p.hours} AS INTEGER)))"
    if p.minutes:
        return f"(date_trunc('minute', {t}) - to_minutes(CAST(minute({t}) % {p.minutes} AS INTEGER)))"
    if p.millis and p.millis % 1000 == 0:
        n = p.millis // 1000
        return f"(date_trunc('second', {t}) - to_seconds(CAST(second({t}) % {n} AS INTEGER)))"
    return None


def _udf_bucket(g: Granularity, cursor: duckdb.DuckDBPyConnection | None) -> str:
    if cursor is None:
        raise ValueError("this granularity needs a cursor to register its bucketing function")
    name = "__rs_bucket_" + hashlib.sha1(repr(g).encode()).hexdigest()[:12]
    cache: dict[int, int] = {}

    def fn(values: pa.Array) -> pa.Array:
        out = []
        for v in values.to_pylist():
            if v is None:
                out.append(None)
                continue
            b = cache.get(v)
            if b is None:
                b = cache[v] = g.bucket_start(v)
            out.append(b)
        return pa.array(out, type=pa.int64())

    try:
        cursor.create_function(name, fn, ["BIGINT"], "BIGINT", type="arrow")  # type: ignore[arg-type]
    except duckdb.Error as e:
        if "already exists" not in str(e):
            raise
    return f"{name}({TIME_MS})"


def format_bucket(ms: int, g: Granularity) -> str:
    """A bucket start as Druid renders it (zone offset for non-UTC period granularities)."""
    if g.kind == "period" and not _is_utc(g):
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
