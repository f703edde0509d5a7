"""Druid's time functions rendered as SQL on epoch millis, for both dialects: wall-clock conversion in a
zone, ``timestamp_shift``, ``timestamp_extract``, ``timestamp_format`` and ``timestamp_parse``. Flooring
lives in :mod:`radstack.time.floor`."""

from __future__ import annotations

import re

from radstack.sql_text import ExpressionError, check_dialect, concat_sql, int_div, string_literal, string_type
from radstack.time import joda
from radstack.time.intervals import Period, TimeParseError

UTC_NAMES = ("UTC", "Z", "ETC/UTC", "GMT", "UCT", "+00:00")


def is_utc_zone(tz: str | None) -> bool:
    return tz is None or tz.upper() in UTC_NAMES


def check_zone(tz: str | None) -> str:
    if tz is None:
        return "UTC"
    try:
        joda.zone(tz)
    except ValueError as e:
        raise ExpressionError(str(e)) from e
    return tz


def millis_to_local_sql(ms: str, tz: str | None, dialect: str = "duckdb") -> str:
    """SQL turning epoch millis into a zone-less TIMESTAMP holding the wall-clock time in ``tz``."""
    dialect = check_dialect(dialect)
    tz = check_zone(tz)
    if dialect == "spark":
        base = f"timestamp_millis({ms})"
        return base if is_utc_zone(tz) else f"from_utc_timestamp({base}, {string_literal(tz, dialect)})"
    base = f"epoch_ms({ms})"
    return base if is_utc_zone(tz) else f"timezone({string_literal(tz, dialect)}, timezone('UTC', {base}))"


def local_to_millis_sql(ts: str, tz: str | None, dialect: str = "duckdb") -> str:
    """SQL turning a zone-less wall-clock TIMESTAMP in ``tz`` back into epoch millis."""
    dialect = check_dialect(dialect)
    tz = check_zone(tz)
    if dialect == "spark":
        return (
            f"unix_millis({ts})"
            if is_utc_zone(tz)
            else f"unix_millis(to_utc_timestamp({ts}, {string_literal(tz, dialect)}))"
        )
    return (
        f"epoch_ms({ts})" if is_utc_zone(tz) else f"epoch_ms(timezone({string_literal(tz, dialect)}, {ts}))"
    )


def parse_period(text: str) -> Period:
    try:
        return Period.parse(text)
    except TimeParseError as e:
        raise ExpressionError(f"invalid period {text!r}") from e


def time_shift_sql(ms: str, period: str, step: str, tz: str | None = "UTC", dialect: str = "duckdb") -> str:
    """SQL for Druid's ``timestamp_shift(ms, period, step, tz)`` / ``TIME_SHIFT``."""
    dialect = check_dialect(dialect)
    tz = check_zone(tz)
    p = parse_period(period)
    months = p.years * 12 + p.months
    days = p.weeks * 7 + p.days
    time_ms = ((p.hours * 60 + p.minutes) * 60_000) + p.millis
    if not months and (not days or is_utc_zone(tz)):
        return f"({ms} + ({step}) * {p.fixed_millis})"
    local = millis_to_local_sql(ms, tz, dialect)
    if dialect == "spark":
        local = f"({local} + make_interval(0, CAST(({step}) * {months} AS INT), 0, CAST(({step}) * {days} AS INT), 0, 0, 0))"
    else:
        if months:
            local = f"({local} + to_months(CAST(({step}) * {months} AS INTEGER)))"
        if days:
            local = f"({local} + to_days(CAST(({step}) * {days} AS INTEGER)))"
    out = local_to_millis_sql(local, tz, dialect)
    return f"({out} + ({step}) * {time_ms})" if time_ms else out


_EXTRACT_UNITS = (
    "EPOCH", "MICROSECOND", "MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY", "DOW", "ISODOW", "DOY",
    "WEEK", "MONTH", "QUARTER", "YEAR", "ISOYEAR", "DECADE", "CENTURY", "MILLENNIUM",
)  # fmt: skip


def time_extract_sql(ms: str, unit: str, tz: str | None = "UTC", dialect: str = "duckdb") -> str:
    """SQL for Druid's ``timestamp_extract(ms, unit, tz)`` (LONG; CENTURY/MILLENNIUM are DOUBLE)."""
    dialect = check_dialect(dialect)
    u = unit.upper()
    if u not in _EXTRACT_UNITS:
        raise ExpressionError(f"timestamp_extract: unknown unit {unit!r}")
    if u == "EPOCH":
        return int_div(ms, "1000", dialect)
    if u == "MICROSECOND":  # what Druid returns for MICROSECOND: epoch seconds / 1000
        return int_div(int_div(ms, "1000", dialect), "1000", dialect)
    if u == "MILLISECOND":
        return f"((({ms} % 1000) + 1000) % 1000)"
    t = millis_to_local_sql(ms, tz, dialect)
    spark_dow = f"((dayofweek({t}) + 5) % 7 + 1)"
    simple = {
        "SECOND": f"second({t})",
        "MINUTE": f"minute({t})",
        "HOUR": f"hour({t})",
        "DAY": f"dayofmonth({t})",
        "DOY": f"dayofyear({t})",
        "MONTH": f"month({t})",
        "QUARTER": f"quarter({t})",
        "YEAR": f"year({t})",
        "DECADE": int_div(f"year({t})", "10", dialect),
        "DOW": spark_dow if dialect == "spark" else f"isodow({t})",
        "ISODOW": spark_dow if dialect == "spark" else f"isodow({t})",
        "WEEK": f"weekofyear({t})" if dialect == "spark" else f"week({t})",
        "ISOYEAR": f"year(date_add({t}, 4 - {spark_dow}))" if dialect == "spark" else f"isoyear({t})",
    }
    if u in simple:
        return f"CAST({simple[u]} AS BIGINT)"
    div = 100.0 if u == "CENTURY" else 1000.0
    return f"CAST(ceil(year({t}) / {div}) AS DOUBLE)"


def _offset_sql(ms: str, tz: str, colon: bool, z_for_zero: bool, dialect: str) -> str:
    if is_utc_zone(tz) or re.fullmatch(r"[+-]\d{1,2}(:?\d{2})?", tz):
        off = joda.format_millis(0, "ZZ" if colon else "Z", tz)
        if z_for_zero and off in ("+00:00", "+0000"):
            off = "Z"
        return string_literal(off, dialect)
    local = millis_to_local_sql(ms, tz, dialect)
    unix = f"unix_millis({local})" if dialect == "spark" else f"epoch_ms({local})"
    off = f"({unix} - {ms})"
    st = string_type(dialect)
    hh = f"lpad(CAST({int_div(f'abs({off})', '3600000', dialect)} AS {st}), 2, '0')"
    mm = f"lpad(CAST({int_div(f'(abs({off}) % 3600000)', '60000', dialect)} AS {st}), 2, '0')"
    parts = [f"(CASE WHEN {off} < 0 THEN '-' ELSE '+' END)", hh] + (["':'"] if colon else []) + [mm]
    body = concat_sql(parts, dialect)
    if z_for_zero:
        return f"(CASE WHEN {off} = 0 THEN 'Z' ELSE {body} END)"
    return body


_SPARK_ISO = "yyyy-MM-dd'T'HH:mm:ss.SSS"


def time_format_sql(
    ms: str, pattern: str | None = None, tz: str | None = "UTC", dialect: str = "duckdb"
) -> str:
    """SQL for Druid's ``timestamp_format(ms, pattern, tz)`` / ``TIME_FORMAT`` with a Joda pattern.

    Without a pattern: ISO with millis, ``Z`` for UTC and ``±HH:MM`` otherwise (Druid's default).
    """
    dialect = check_dialect(dialect)
    tz = check_zone(tz)
    t = millis_to_local_sql(ms, tz, dialect)
    if pattern is None:
        body = (
            f"date_format({t}, {string_literal(_SPARK_ISO, dialect)})"
            if dialect == "spark"
            else f"strftime({t}, '%Y-%m-%dT%H:%M:%S.%g')"
        )
        return concat_sql([body, _offset_sql(ms, tz, True, True, dialect)], dialect)
    try:
        tokens = joda.tokenize(pattern)
    except ValueError as e:
        raise ExpressionError(f"timestamp_format: {e}") from e
    pieces: list[str] = []
    group: list[joda.Token] = []

    def flush() -> None:
        if not group:
            return
        sub = "".join(
            "'" + tk.text.replace("'", "''") + "'" if tk.is_literal else tk.letter * tk.count for tk in group
        )
        try:
            if dialect == "spark":
                pieces.append(f"date_format({t}, {string_literal(joda.joda_to_spark(sub), dialect)})")
            else:
                pieces.append(f"strftime({t}, {string_literal(joda.joda_to_strftime(sub), dialect)})")
        except ValueError as e:
            raise ExpressionError(f"timestamp_format: {e}") from e
        group.clear()

    for tk in tokens:
        if tk.letter == "Z" and tk.count <= 2:
            flush()
            pieces.append(_offset_sql(ms, tz, tk.count == 2, False, dialect))
        elif tk.letter == "Z" or (tk.letter == "z" and is_utc_zone(tz)):
            flush()
            pieces.append(string_literal("UTC" if is_utc_zone(tz) else tz, dialect))
        elif tk.letter == "z":
            raise ExpressionError("timestamp_format: zone names ('z') are only supported for UTC")
        elif tk.letter == "S" and dialect == "duckdb" and tk.count not in (3, 6, 9):
            flush()
            ms3 = f"strftime({t}, '%g')"
            pieces.append(
                f"left({ms3}, {tk.count})" if tk.count < 3 else f"({ms3} || '{'0' * (tk.count - 3)}')"
            )
        else:
            group.append(tk)
    flush()
    return concat_sql(pieces, dialect) if pieces else "''"


def time_parse_sql(
    text: str, pattern: str | None = None, tz: str | None = "UTC", dialect: str = "duckdb"
) -> str:
    """SQL for Druid's ``timestamp_parse(text, pattern, tz)`` / ``TIME_PARSE``: epoch millis or NULL."""
    dialect = check_dialect(dialect)
    tz = check_zone(tz)
    if pattern is None:
        if dialect == "spark":
            return local_to_millis_sql(f"try_cast({text} AS TIMESTAMP)", tz, dialect)
        has_offset = f"regexp_matches({text}, '[T ]\\d{{1,2}}(:\\d{{2}}(:\\d{{2}}(\\.\\d+)?)?)?\\s*(Z|[+-]\\d{{2}}(:?\\d{{2}})?)$')"
        return (
            f"(CASE WHEN {has_offset} THEN epoch_ms(TRY_CAST({text} AS TIMESTAMPTZ)) "
            f"ELSE {local_to_millis_sql(f'TRY_CAST({text} AS TIMESTAMP)', tz, dialect)} END)"
        )
    try:
        tokens = joda.tokenize(pattern)
    except ValueError as e:
        raise ExpressionError(f"timestamp_parse: {e}") from e
    if any(tk.letter == "z" or (tk.letter == "Z" and tk.count > 2) for tk in tokens):
        raise ExpressionError("timestamp_parse: parsing zone names/ids is not supported")
    has_offset = any(tk.letter == "Z" for tk in tokens)
    try:
        if dialect == "spark":
            parsed = f"try_to_timestamp({text}, {string_literal(joda.joda_to_spark(pattern), dialect)})"
            return f"unix_millis({parsed})" if has_offset else local_to_millis_sql(parsed, tz, dialect)
        fmt = joda.joda_to_strftime(pattern)
    except ValueError as e:
        raise ExpressionError(f"timestamp_parse: {e}") from e
    if has_offset:
        return (
            f"epoch_ms(try_strptime(regexp_replace({text}, 'Z$', '+00:00'), {string_literal(fmt, dialect)}))"
        )
    return local_to_millis_sql(f"try_strptime({text}, {string_literal(fmt, dialect)})", tz, dialect)
