"""``timestampSpec`` parsing, vectorised: one Arrow column in, int64 epoch millis out.

Formats follow Druid's ``TimestampParser``:

* numbers (any numeric Arrow type) are read by the format's unit: ``posix`` seconds, ``micro``,
  ``nano``, ``ruby`` (fractional seconds), everything else millis — fractions are truncated like
  Java's ``longValue()``;
* strings: ``iso`` (ISO-8601 date or date-time, with or without offset; no offset means UTC),
  ``auto`` (an all-digit string is millis, anything else ISO), ``millis`` / ``posix`` / ``micro`` /
  ``nano`` (integer strings), ``ruby`` (decimal seconds), or a Joda pattern
  (:func:`radstack.time.joda.joda_to_strftime`);
* Arrow timestamps and dates are converted directly.

Values that cannot be parsed become null; the caller counts them as unparseable. The heavy lifting
is DuckDB over Arrow (no Python row loops).
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from radstack.duckdb_sandbox import sandboxed_connection
from radstack.time.joda import joda_to_strftime, parse_to_millis

__all__ = ["parse_timestamp_column", "string_millis_sql", "utc_connection", "query_arrow", "NUMERIC_UNITS"]

#: formats that give numbers their own unit (every other format reads numbers as millis)
NUMERIC_UNITS = ("millis", "posix", "micro", "nano", "ruby")


def query_arrow(con: duckdb.DuckDBPyConnection, sql: str) -> pa.Table:
    """Run ``sql`` and return the result as one Arrow table (DuckDB 1.x and 2.x spell it differently)."""
    rel = con.sql(sql)
    if rel is None:
        return pa.table({})
    fetch = getattr(rel, "to_arrow_table", None) or rel.arrow
    return fetch()


def utc_connection() -> duckdb.DuckDBPyConnection:
    """A locked DuckDB connection (:mod:`radstack.duckdb_sandbox`: it runs expressions a spec names)
    whose session time zone is UTC (what the ISO casts below assume)."""
    return sandboxed_connection(time_zone="UTC")


def _numeric_millis_sql(col: str, fmt: str) -> str:
    """SQL that turns a DOUBLE/BIGINT column of numbers in ``fmt``'s unit into BIGINT millis."""
    if fmt == "posix":
        return f"CAST(trunc({col}) AS BIGINT) * 1000"
    if fmt == "micro":
        return f"CAST(trunc({col}) AS BIGINT) // 1000"
    if fmt == "nano":
        return f"CAST(trunc({col}) AS BIGINT) // 1000000"
    if fmt == "ruby":
        return f"CAST(trunc({col} * 1000) AS BIGINT)"
    return f"CAST(trunc({col}) AS BIGINT)"


# ISO forms DuckDB does not read itself: a bare year, year-month, or a date-time with hours only.
# Only strings that look like an ISO date (YYYY-…) reach the cast, so DuckDB's other spellings
# ("infinity", "epoch", "2018/01/01") stay unparseable, as in Druid.
_ISO_SQL = (
    "CASE WHEN regexp_matches(s, '^[+-]?\\d{4}(-|$)') THEN epoch_ms(TRY_CAST("
    "CASE"
    " WHEN regexp_full_match(s, '[+-]?\\d{4}') THEN s || '-01-01'"
    " WHEN regexp_full_match(s, '[+-]?\\d{4}-\\d{2}') THEN s || '-01'"
    " WHEN regexp_matches(s, '^\\d{4}-\\d{2}-\\d{2}T\\d{2}($|[Zz+-])')"
    "   THEN regexp_replace(s, '^(\\d{4}-\\d{2}-\\d{2}T\\d{2})', '\\1:00')"
    " ELSE s END AS TIMESTAMPTZ)) END"
)


def _string_sql(fmt: str) -> str:
    """SQL over the trimmed VARCHAR column ``s`` → BIGINT millis or NULL."""
    if fmt == "iso":
        return _ISO_SQL
    if fmt == "auto":
        return f"CASE WHEN regexp_full_match(s, '\\d+') THEN TRY_CAST(s AS BIGINT) ELSE {_ISO_SQL} END"
    if fmt in ("millis", "posix", "micro", "nano"):
        n = "TRY_CAST(CASE WHEN regexp_full_match(s, '-?\\d+') THEN s END AS BIGINT)"
        return _numeric_millis_sql(n, fmt)
    if fmt == "ruby":
        return _numeric_millis_sql("TRY_CAST(s AS DOUBLE)", "ruby")

    pattern = joda_to_strftime(fmt).replace("'", "''")
    return f"epoch_ms(try_strptime(s, '{pattern}'))"


def _known(fmt: str) -> str:
    """Druid's named formats are case-insensitive; a Joda pattern is not."""
    return fmt.lower() if fmt.lower() in ("iso", "auto", *NUMERIC_UNITS) else fmt


def string_millis_sql(fmt: str) -> str | None:
    """DuckDB SQL turning the trimmed VARCHAR column ``s`` into BIGINT millis (NULL where it cannot be
    read) for a ``timestampSpec.format``, run on a :func:`utc_connection`; None for a Joda pattern
    DuckDB's ``strptime`` cannot read (:func:`parse_timestamp_column` takes those)."""
    try:
        return f"CAST({_string_sql(_known(fmt))} AS BIGINT)"
    except ValueError:
        return None


def parse_timestamp_column(
    arr: pa.Array | pa.ChunkedArray, fmt: str, missing_value: int | None = None
) -> pa.Array:
    """Parse a timestamp column by ``timestampSpec.format``; returns int64 epoch millis, null where a
    value cannot be parsed. ``missing_value`` (millis) stands in for null inputs, as Druid's
    ``timestampSpec.missingValue`` does."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    fmt = _known(fmt)
    if pa.types.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    out = _parse(arr, fmt)
    if missing_value is not None and arr.null_count:
        out = pc.if_else(pc.is_null(arr), pa.scalar(missing_value, pa.int64()), out)
    return out


def _parse(arr: pa.Array, fmt: str) -> pa.Array:
    typ = arr.type
    if pa.types.is_null(typ) or pa.types.is_boolean(typ):
        return pa.nulls(len(arr), pa.int64())
    if pa.types.is_timestamp(typ):
        return _timestamp_to_ms(arr)
    if pa.types.is_date(typ):
        days = arr.cast(pa.date32()).cast(pa.int32()).cast(pa.int64())
        return pc.multiply(days, pa.scalar(86_400_000, pa.int64()))
    if pa.types.is_integer(typ):
        unit = fmt if fmt in NUMERIC_UNITS else "millis"
        col = "CAST(v AS DOUBLE)" if unit == "ruby" else "CAST(v AS BIGINT)"
        return _run(arr, _numeric_millis_sql(col, unit))
    if pa.types.is_floating(typ) or pa.types.is_decimal(typ):
        unit = fmt if fmt in NUMERIC_UNITS else "millis"
        col = "CASE WHEN isfinite(CAST(v AS DOUBLE)) THEN CAST(v AS DOUBLE) END"
        return _run(arr, _numeric_millis_sql(col, unit))
    if pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_string_view(typ):
        arr = arr.cast(pa.string())
        try:
            sql = _string_sql(fmt)
        except ValueError:  # a Joda letter DuckDB's strptime lacks (G, k, K): parse each distinct value
            return _joda_python(arr, fmt)
        return _run(arr, sql, strings=True)
    raise TypeError(f"cannot read timestamps from a column of type {typ}")


def _joda_python(arr: pa.Array, pattern: str) -> pa.Array:

    enc = pc.dictionary_encode(arr)
    values = [None if v is None else parse_to_millis(v.strip(), pattern) for v in enc.dictionary.to_pylist()]
    return pc.take(pa.array(values, pa.int64()), enc.indices)


def _timestamp_to_ms(arr: pa.Array) -> pa.Array:
    """Arrow timestamp (any unit; zone-aware values are UTC instants) → int64 millis, floored."""
    ints = arr.cast(pa.timestamp(arr.type.unit)).cast(pa.int64())
    unit = arr.type.unit
    if unit == "ms":
        return ints
    if unit == "s":
        return pc.multiply(ints, pa.scalar(1000, pa.int64()))
    div = pa.scalar({"us": 1000, "ns": 1_000_000}[unit], pa.int64())
    q = pc.divide(ints, div)  # truncates toward zero
    neg = pc.less(pc.subtract(ints, pc.multiply(q, div)), pa.scalar(0, pa.int64()))
    return pc.if_else(neg, pc.subtract(q, pa.scalar(1, pa.int64())), q)


def _run(arr: pa.Array, expr: str, *, strings: bool = False) -> pa.Array:
    """Evaluate ``expr`` (over ``v``, or the trimmed string ``s``) for every value, in order."""
    con = utc_connection()
    try:
        con.register("__ts_input", pa.table({"v": arr}))
        src = "(SELECT trim(v) AS s FROM __ts_input)" if strings else "__ts_input"
        res = query_arrow(con, f"SELECT CAST({expr} AS BIGINT) AS ms FROM {src}")
    finally:
        con.close()
    return res.column("ms").combine_chunks()
