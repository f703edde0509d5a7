"""Parse + validate: raw event bytes → typed rows with ``__time`` (epoch millis), or a dead-letter
reason.

:func:`parse_events` adds, to every input row, the fields the spec reads (typed as the spec says),
``__time`` and ``__reason`` (NULL for a valid event, else why it is invalid) and keeps the original
bytes (``__raw``) and the Kafka coordinates. :func:`valid_events` / :func:`dead_letters` split the
result. Checks, first failure wins: empty message; malformed JSON (or not an object); missing
timestamp; unparseable timestamp; missing event id; missing required field
(``processing.required``); a value that does not convert to its declared type. Timestamps follow
Druid's ``timestampSpec`` formats (``radstack.timestamps``): native Spark SQL for
iso/auto/millis/posix/micro/nano/ruby, the indexer's own parser (an Arrow UDF) for Joda patterns.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import pyarrow as pa

from radstack.expressions import quote_identifier
from radstack.pipeline.input_schema import CORRUPT_COLUMN, field_types, input_fields, json_schema_ddl
from radstack.spec import TIME_COLUMN, DatasourceSpec
from radstack.timestamps import parse_timestamp_column

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = [
    "RAW_COLUMN",
    "REASON_COLUMN",
    "BYTES_COLUMN",
    "parse_events",
    "valid_events",
    "dead_letters",
    "timestamp_sql",
    "convert_sql",
    "q",
]

RAW_COLUMN = "__raw"
REASON_COLUMN = "__reason"
BYTES_COLUMN = "__bytes"
TOPIC_COLUMN = "__topic"
PARTITION_COLUMN = "__partition"
OFFSET_COLUMN = "__offset"
META_COLUMNS = (RAW_COLUMN, TOPIC_COLUMN, PARTITION_COLUMN, OFFSET_COLUMN)

_ISO_LIKE = r"^[+-]?[0-9]{4}(-|$)"


def q(name: str) -> str:
    """A Spark SQL identifier (the one quoting rule: :func:`radstack.expressions.quote_identifier`)."""
    return quote_identifier(name, "spark")


def _lit(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def timestamp_sql(col: str, fmt: str) -> str | None:
    """Spark SQL turning the trimmed STRING column ``col`` into BIGINT millis (NULL when it cannot be
    read) for a ``timestampSpec.format``; None for a Joda pattern (see :func:`parse_events`)."""
    f = fmt.lower()
    iso = f"CASE WHEN {col} RLIKE '{_ISO_LIKE}' THEN unix_millis(try_cast({col} AS TIMESTAMP)) END"
    integer = f"(CASE WHEN {col} RLIKE '^-?[0-9]+$' THEN try_cast({col} AS BIGINT) END)"
    if f == "iso":
        return iso
    if f == "auto":
        return f"(CASE WHEN {col} RLIKE '^[0-9]+$' THEN try_cast({col} AS BIGINT) ELSE {iso} END)"
    if f == "millis":
        return integer
    if f == "posix":
        return f"try_multiply({integer}, 1000L)"
    if f == "micro":
        return f"({integer} div 1000L)"
    if f == "nano":
        return f"({integer} div 1000000L)"
    if f == "ruby":
        return f"try_cast(try_cast({col} AS DOUBLE) * 1000D AS BIGINT)"
    return None


def convert_sql(col: str, druid_type: str) -> str:
    """Spark SQL converting a STRING column to a Druid type as the indexer does (longs: integers
    exactly, decimals truncated toward zero); NULL when it does not convert."""
    t = druid_type.lower()
    if t in ("string", "json"):  # json: the field's JSON text (normalized when rolled up)
        return col
    if t == "long":
        return (
            f"(CASE WHEN trim({col}) RLIKE '^[+-]?[0-9]+$' THEN try_cast(trim({col}) AS BIGINT) "
            f"ELSE try_cast(try_cast(trim({col}) AS DOUBLE) AS BIGINT) END)"
        )
    if t == "double":
        return f"try_cast(trim({col}) AS DOUBLE)"
    if t == "float":
        return f"try_cast(trim({col}) AS FLOAT)"
    raise ValueError(f"unknown type {druid_type!r}")


def parse_events(
    raw: DataFrame, spec: DatasourceSpec, *, value_col: str = "value", sizes: bool = False
) -> DataFrame:
    """Parse the JSON in ``raw[value_col]`` (binary or string) and validate it against ``spec``.

    The result has the spec's input fields (typed), ``__time`` (BIGINT millis), ``__reason``
    (NULL = valid), ``__raw`` (the original bytes) and ``__topic``/``__partition``/``__offset`` when
    the input has Kafka's ``topic``/``partition``/``offset`` columns (NULL otherwise); with ``sizes``,
    also ``__bytes`` (the event's size in bytes, for the ``processedBytes`` stat)."""
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    ds = spec.data_schema
    fields = input_fields(spec)
    types = field_types(spec)
    ts = ds.timestamp_spec
    cols = set(raw.columns)

    raw_bin = F.col(value_col).cast("binary")
    meta = [raw_bin.alias(RAW_COLUMN)]
    for src, dst, typ in (("topic", TOPIC_COLUMN, "string"), ("partition", PARTITION_COLUMN, "int"),
                          ("offset", OFFSET_COLUMN, "bigint")):  # fmt: skip
        meta.append((F.col(src) if src in cols else F.lit(None)).cast(typ).alias(dst))
    # `inline(array(struct))` (a Generate) is a barrier: later filters on the parsed columns cannot be
    # pushed below it, which would inline from_json once per referenced field (10× the JSON work).
    meta_struct = [F.col(q(c)) for c in META_COLUMNS]
    parsed = raw.select(*meta)
    flat = parsed.select(
        F.inline(
            F.array(
                F.struct(
                    *meta_struct,
                    F.from_json(
                        F.col(RAW_COLUMN).cast("string"),
                        json_schema_ddl(fields),
                        {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN},
                    ).alias("__j"),
                )
            )
        )
    ).select(*META_COLUMNS, "__j.*")

    ts_col = q(ts.column)
    trimmed = f"trim({ts_col})"
    ts_expr = timestamp_sql(trimmed, ts.format)
    time_col = _joda_udf(ts.format)(F.col(ts.column)) if ts_expr is None else F.expr(ts_expr)
    if ts.missing_value is not None:
        time_col = F.when(F.col(ts.column).isNull(), F.lit(ts.missing_value).cast("bigint")).otherwise(time_col)
    flat = flat.withColumn("__t", time_col.cast("bigint"))

    reasons: list[tuple[str, str]] = [
        (f"{q(RAW_COLUMN)} IS NULL OR length({q(RAW_COLUMN)}) = 0", "'empty message'"),
        (f"{q(CORRUPT_COLUMN)} IS NOT NULL", "'malformed JSON'"),
    ]
    if ts.missing_value is None:
        reasons.append((f"{ts_col} IS NULL", _lit(f"missing timestamp field '{ts.column}'")))
    quote = _lit("'")
    reasons.append(("__t IS NULL", f"concat({_lit('unparseable timestamp ' + chr(39))}, {ts_col}, {quote})"))
    if spec.processing.event_id:
        eid = q(spec.processing.event_id)
        reasons.append((f"{eid} IS NULL OR trim({eid}) = ''", _lit(f"missing event id field '{spec.processing.event_id}'")))
    for f in spec.processing.extra.get("required", []) or []:
        reasons.append((f"{q(str(f))} IS NULL", _lit(f"missing required field '{f}'")))
    for f, t in types.items():
        if t in ("string", "json") or f == ts.column:
            continue
        c = q(f)
        reasons.append(
            (f"{c} IS NOT NULL AND {convert_sql(c, t)} IS NULL",
             f"concat({_lit(f'field {f}: ' + chr(39))}, {c}, {_lit(chr(39) + f' is not a {t}')})")
        )
    case = "CASE " + " ".join(f"WHEN {cond} THEN {msg}" for cond, msg in reasons) + " END"
    out_cols: list[Column] = []
    for f in fields:
        t = types[f]
        out_cols.append(F.expr(convert_sql(q(f), t)).alias(f) if t not in ("string", "json") else F.col(q(f)).alias(f))
    return flat.select(
        F.inline(
            F.array(
                F.struct(
                    *out_cols,
                    F.col("__t").alias(TIME_COLUMN),
                    *([F.length(F.col(RAW_COLUMN)).cast("bigint").alias(BYTES_COLUMN)] if sizes else []),
                    F.expr(case).alias(REASON_COLUMN),
                    *[F.col(c) for c in META_COLUMNS],
                )
            )
        )
    )


def valid_events(parsed: DataFrame) -> DataFrame:
    """The valid rows of :func:`parse_events`, without the bookkeeping columns."""
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    keep = [c for c in parsed.columns if c not in (REASON_COLUMN, *META_COLUMNS)]
    return parsed.where(F.col(REASON_COLUMN).isNull()).select(*[F.col(q(c)) for c in keep])


def dead_letters(parsed: DataFrame) -> DataFrame:
    """The invalid rows: ``__raw`` (original bytes), ``__reason`` and the Kafka coordinates."""
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    return parsed.where(F.col(REASON_COLUMN).isNotNull()).select(REASON_COLUMN, *META_COLUMNS)


def _joda_udf(pattern: str):  # type: ignore[no-untyped-def]
    """An Arrow-backed (pandas) UDF parsing a Joda pattern with the indexer's own parser."""

    from pyspark.sql.functions import PandasUDFType, pandas_udf  # lazy: only Spark code paths load pyspark

    def parse(s):  # type: ignore[no-untyped-def]  # pandas Series in, Series of float millis out


        arr = pa.array(s.str.strip(), type=pa.string(), from_pandas=True)
        return parse_timestamp_column(arr, pattern).cast(pa.float64()).to_pandas()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pandas_udf(parse, "double", PandasUDFType.SCALAR)
