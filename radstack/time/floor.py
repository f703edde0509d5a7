"""Flooring an instant to a granularity — :meth:`Granularity.bucket_start` — rendered for every target
from one definition: SQL on epoch millis for DuckDB and Spark (:func:`granularity_floor_sql`,
:func:`time_floor_sql`), SQL on a DuckDB TIMESTAMP column (:func:`timestamp_floor_sql`,
:func:`timestamp_bucket_millis_sql`) and numpy
(:func:`floor_millis`). ``tests/unit/test_time_floor.py`` checks every target against ``bucket_start``
on random instants, periods, origins and zones."""

from __future__ import annotations

import numpy as np

from radstack.sql_text import ExpressionError, check_dialect, string_literal
from radstack.time import joda
from radstack.time.granularity import Granularity
from radstack.time.intervals import Period, ms_to_datetime
from radstack.time.sql import (
    check_zone,
    is_utc_zone,
    local_to_millis_sql,
    millis_to_local_sql,
    parse_period,
    time_shift_sql,
)


def _fields(p: Period) -> list[tuple[str, int]]:
    return [
        (name, v)
        for name, v in (
            ("year", p.years), ("month", p.months), ("week", p.weeks), ("day", p.days),
            ("hour", p.hours), ("minute", p.minutes), ("millis", p.millis),
        )
        if v
    ]  # fmt: skip


def _spark_day_floor_from_origin(ms: str, p: Period, period: str, origin: int, tz: str) -> str:
    """Spark: whole days/weeks counted from an origin at local midnight (Druid's default origin)."""

    origin_local = ms_to_datetime(origin).astimezone(joda.zone(tz))
    if p.is_calendar or p.fixed_millis % 86_400_000 or origin_local.time() != origin_local.time().min:
        raise ExpressionError(
            f"timestamp_floor with period {period!r} and an origin is not supported on Spark"
        )
    n = p.fixed_millis // 86_400_000
    local = millis_to_local_sql(ms, tz, "spark")
    olocal = millis_to_local_sql(str(origin), tz, "spark")
    d = f"datediff(to_date({local}), to_date({olocal}))"
    k = f"({d} - pmod({d}, {n}))"
    return local_to_millis_sql(f"CAST(date_add(to_date({olocal}), {k}) AS TIMESTAMP)", tz, "spark")


def _mod_floor(x: str, step: int, origin: int, dialect: str) -> str:
    """Floor ``x`` to a multiple of ``step`` counted from ``origin`` (exact integer arithmetic)."""
    shifted = f"({x} - {origin})" if origin else x
    return f"({x} - ((({shifted} % {step}) + {step}) % {step}))"


def time_floor_sql(
    ms: str,
    period: str | Period,
    origin: int | None = None,
    tz: str | None = "UTC",
    dialect: str = "duckdb",
) -> str:
    """SQL for Druid's ``timestamp_floor(ms, period, origin, tz)`` / ``TIME_FLOOR`` (epoch millis)."""
    dialect = check_dialect(dialect)
    tz = check_zone(tz)
    p = period if isinstance(period, Period) else parse_period(period)
    period = p.iso()
    fields = _fields(p)
    fixed = not p.is_calendar and not p.weeks and (not p.days or is_utc_zone(tz))
    if origin is None and len(fields) == 1 and fields[0][1] > 1:
        # Druid aligns several units (PT6H, P2D …) on multiples from its default origin,
        # 1970-01-01T00:00 on the zone's wall clock (PeriodGranularity).
        origin = Granularity("period", p, tz).default_origin()
    if origin is not None:
        if fixed and p.fixed_millis > 0:
            return _mod_floor(ms, p.fixed_millis, origin, dialect)
        if dialect == "spark":
            return _spark_day_floor_from_origin(ms, p, period, origin, tz)
        local = millis_to_local_sql(ms, tz, dialect)
        olocal = millis_to_local_sql(str(origin), tz, dialect)
        months = p.years * 12 + p.months
        if months and (p.weeks or p.days or p.fixed_millis):
            raise ExpressionError(f"timestamp_floor cannot mix months and days in {period!r}")
        if not months:
            if p.hours or p.minutes or p.millis:  # days and a time of day step on the wall clock
                raise ExpressionError(f"timestamp_floor with period {period!r} in zone {tz!r} is not supported")
            width = f"to_days({p.weeks * 7 + p.days})"
            return local_to_millis_sql(f"time_bucket({width}, {local}, {olocal})", tz, dialect)
        # Whole months counted from the origin (DuckDB's time_bucket ignores the origin's day).
        diff = f"((year({local}) - year({olocal})) * 12 + month({local}) - month({olocal}))"
        k = f"({diff} - ((({diff} % {months}) + {months}) % {months}))"
        cand = f"({olocal} + to_months(CAST({k} AS INTEGER)))"
        prev = f"({olocal} + to_months(CAST({k} - {months} AS INTEGER)))"
        return local_to_millis_sql(f"(CASE WHEN {cand} > {local} THEN {prev} ELSE {cand} END)", tz, dialect)
    if is_utc_zone(tz) and fixed and p.fixed_millis > 0 and 86_400_000 % p.fixed_millis == 0:
        return _mod_floor(ms, p.fixed_millis, 0, dialect)
    if len(fields) != 1:
        if fixed and p.fixed_millis > 0 and is_utc_zone(tz):
            return _mod_floor(ms, p.fixed_millis, 0, dialect)
        raise ExpressionError(f"timestamp_floor with period {period!r} in zone {tz!r} is not supported")
    unit, n = fields[0]
    t = millis_to_local_sql(ms, tz, dialect)
    y, mo, d, h, mi = (f"year({t})", f"month({t})", f"dayofmonth({t})", f"hour({t})", f"minute({t})")

    def trunc(u: str) -> str:
        return f"date_trunc('{u}', {t})"

    if unit == "millis":
        if n % 1000 or 60_000 % n:
            # Sub-minute steps are zone-independent (zone offsets are whole minutes here).
            return _mod_floor(ms, n, 0, dialect)
        local = (
            trunc("second")
            if n == 1000
            else (f"make_timestamp({y}, {mo}, {d}, {h}, {mi}, second({t}) - second({t}) % {n // 1000})")
        )
    elif unit == "year":
        local = trunc("year") if n == 1 else f"make_timestamp({y} - {y} % {n}, 1, 1, 0, 0, 0)"
    elif unit == "month":
        if n == 1:
            local = trunc("month")
        elif n == 3:
            local = trunc("quarter")
        else:
            local = f"make_timestamp({y}, {mo} - ({mo} - 1) % {n}, 1, 0, 0, 0)"
    elif unit == "week":
        if n != 1:
            raise ExpressionError(f"timestamp_floor with period {period!r} is not supported")
        local = trunc("week")
    elif unit == "day":
        local = trunc("day") if n == 1 else f"make_timestamp({y}, {mo}, {d} - ({d} - 1) % {n}, 0, 0, 0)"
    elif unit == "hour":
        local = trunc("hour") if n == 1 else f"make_timestamp({y}, {mo}, {d}, {h} - {h} % {n}, 0, 0)"
    else:  # minute
        local = trunc("minute") if n == 1 else f"make_timestamp({y}, {mo}, {d}, {h}, {mi} - {mi} % {n}, 0)"
    return local_to_millis_sql(local, tz, dialect)


def granularity_floor_sql(gran: Granularity, ms: str, dialect: str = "duckdb") -> str:
    """SQL for :meth:`Granularity.bucket_start` of the epoch-millis expression ``ms`` (the indexer's
    ``queryGranularity`` truncation and segment bucketing); raises :class:`ExpressionError` where the
    dialect cannot say it (a few zoned periods with an origin on Spark)."""
    if gran.is_none:
        return ms
    if gran.is_all:
        return f"CAST({gran.bucket_start(0)} AS BIGINT)"
    if gran.kind == "duration":
        return _mod_floor(ms, int(gran.duration or 0), int(gran.origin or 0), check_dialect(dialect))
    assert gran.period is not None
    return time_floor_sql(ms, gran.period, gran.origin, gran.time_zone, dialect)


def time_ceil_sql(
    ms: str, period: str, origin: int | None = None, tz: str | None = "UTC", dialect: str = "duckdb"
) -> str:
    """SQL for Druid's ``timestamp_ceil``: ``ms`` itself when on a boundary, else the next bucket start."""
    floor = time_floor_sql(ms, period, origin, tz, dialect)
    nxt = time_shift_sql(floor, period, "1", tz, dialect)
    return f"(CASE WHEN {floor} = {ms} THEN {ms} ELSE {nxt} END)"


# One-unit periods DuckDB truncates natively, and sub-day steps that tile their parent field.
_TRUNC_UNITS = {"P1Y": "year", "P3M": "quarter", "P1M": "month", "P1W": "week", "P1D": "day",
                "PT1H": "hour", "PT1M": "minute", "PT1S": "second"}  # fmt: skip


def _tiling_step(p: Period) -> str | None:
    """A DuckDB interval for one-field sub-day periods that tile their parent field (PT5M, PT6H)."""
    if p.is_calendar or p.weeks or p.days:
        return None
    nonzero = [f for f in ((p.hours, 24, "hours"), (p.minutes, 60, "minutes"), (p.millis, 60_000, "ms")) if f[0]]
    if len(nonzero) != 1:
        return None
    value, parent, unit = nonzero[0]
    if unit == "ms":
        return f"{value // 1000} seconds" if value % 1000 == 0 and 60 % (value // 1000) == 0 else None
    return f"{value} {unit}" if parent % value == 0 else None


def _truncated_sql(gran: Granularity, col: str) -> str | None:
    """``date_trunc`` or ``time_bucket`` of the TIMESTAMP ``col`` where they say ``gran`` (one-unit
    periods, in any zone; sub-day steps that tile their parent field, in UTC); None elsewhere."""
    if gran.kind != "period" or gran.origin is not None or gran.period is None:
        return None
    unit = _TRUNC_UNITS.get(gran.period.iso())
    utc = is_utc_zone(gran.time_zone)
    if unit and utc:
        return f"date_trunc('{unit}', {col})"
    if unit:
        tz = string_literal(check_zone(gran.time_zone))
        return f"timezone('UTC', timezone({tz}, date_trunc('{unit}', timezone({tz}, timezone('UTC', {col})))))"
    step = _tiling_step(gran.period)
    return f"time_bucket(INTERVAL '{step}', {col})" if step and utc else None


def timestamp_floor_sql(gran: Granularity, col: str) -> str:
    """DuckDB SQL flooring the TIMESTAMP expression ``col`` to ``gran`` (a TIMESTAMP again): ``date_trunc``
    or ``time_bucket`` where they say it, else :func:`granularity_floor_sql` on its epoch millis."""
    if gran.is_none:
        return col
    truncated = _truncated_sql(gran, col)
    if truncated is not None:
        return truncated
    return f"epoch_ms(CAST({granularity_floor_sql(gran, f'epoch_ms({col})')} AS BIGINT))"


def timestamp_bucket_sql(gran: Granularity, col: str) -> str | None:
    """The bucket start of the TIMESTAMP ``col`` as a TIMESTAMP, where ``date_trunc``/``time_bucket`` say it;
    None elsewhere. Grouping by it, then taking ``epoch_ms`` of the groups, is ≈ 3× faster in DuckDB than
    grouping by :func:`timestamp_bucket_millis_sql` (measured: 18 against 61 ms over 1 M rows by hour)."""
    return None if gran.is_none else _truncated_sql(gran, col)


def timestamp_bucket_millis_sql(gran: Granularity, col: str) -> str:
    """DuckDB SQL for the bucket start of the TIMESTAMP ``col`` as epoch millis (BIGINT): the native
    query bucket. The same choice as :func:`timestamp_floor_sql`, without a round trip."""
    truncated = None if gran.is_none else _truncated_sql(gran, col)
    if truncated is not None:
        return f"epoch_ms({truncated})"
    return granularity_floor_sql(gran, f"epoch_ms({col})")


def floor_millis(values: np.ndarray, gran: Granularity) -> np.ndarray:
    """``gran.bucket_start`` of every value of an int64 epoch-millis array, vectorised."""
    values = np.asarray(values, dtype=np.int64)
    if values.size == 0 or gran.is_none:
        return values.copy()
    if gran.is_all:
        return np.full(values.shape, gran.bucket_start(0), dtype=np.int64)
    step, origin = _fixed_step(gran)
    if step is not None:
        return origin + np.floor_divide(values - origin, step) * step
    # Calendar or zoned periods: walk the buckets between min and max, or map the distinct values,
    # whichever is less Python work.
    uniq = np.unique(values)
    lo, hi = int(uniq[0]), int(uniq[-1])
    est = (hi - lo) // max(gran.approx_millis(), 1) + 2
    if est <= len(uniq):
        starts = [gran.bucket_start(lo)]
        while starts[-1] <= hi:
            starts.append(gran.next_start(starts[-1]))
        arr = np.asarray(starts, dtype=np.int64)
        return arr[np.searchsorted(arr, values, side="right") - 1]
    mapped = np.fromiter((gran.bucket_start(int(v)) for v in uniq), dtype=np.int64, count=len(uniq))
    return mapped[np.searchsorted(uniq, values)]


def _fixed_step(gran: Granularity) -> tuple[int | None, int]:
    """(step, origin) when buckets are a fixed length from an origin; (None, 0) otherwise."""
    if gran.kind == "duration":
        return int(gran.duration or 0), int(gran.origin or 0)
    if gran.kind != "period" or gran.period is None:
        return None, 0
    p = gran.period
    if p.is_calendar:
        return None, 0
    if gran.origin is not None:
        if not p.weeks and not p.days:
            return p.fixed_millis, int(gran.origin)
        return None, 0
    if not p.weeks and not p.days and gran.time_zone == "UTC" and 86_400_000 % p.fixed_millis == 0:
        return p.fixed_millis, 0
    return None, 0
