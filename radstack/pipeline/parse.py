"""Parse + validate: raw event bytes → typed rows with ``__time`` (epoch millis), or a dead-letter
reason.

:func:`parse_events` adds, to every input row, the fields the spec reads (typed as the spec says),
``__time`` and ``__reason`` (NULL for a valid event, else why it is invalid) and keeps the original
bytes (``__raw``) and the Kafka coordinates. :func:`valid_events` / :func:`dead_letters` split the
result. Checks, first failure wins: empty message; malformed JSON (or not an object); missing
timestamp; unparseable timestamp; missing event id; missing required field
(``processing.required``); a value that does not convert to its declared type. Timestamps follow
Druid's ``timestampSpec`` formats (``radstack.time.timestamps``): native Spark SQL for
iso/auto/millis/posix/micro/nano/ruby, the indexer's own parser (an Arrow UDF) for Joda patterns.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import pyarrow as pa

from radstack.pipeline.input_schema import CORRUPT_COLUMN, field_types, input_fields, json_schema_ddl
from radstack.pipeline.spark_session import is_connect
from radstack.spec import TIME_COLUMN, DatasourceSpec
from radstack.sql_text import quote_identifier
from radstack.storage.raw_archive import PARSED_COLUMN, PARSED_KINDS, parsed_column
from radstack.time.timestamps import parse_timestamp_column
from radstack.value_sql import numeric_cast_sql

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
    "q",
]

RAW_COLUMN = "__raw"
REASON_COLUMN = "__reason"
BYTES_COLUMN = "__bytes"
TOPIC_COLUMN = "__topic"
PARTITION_COLUMN = "__partition"
OFFSET_COLUMN = "__offset"
META_COLUMNS = (RAW_COLUMN, TOPIC_COLUMN, PARTITION_COLUMN, OFFSET_COLUMN)
_NOT_OBJECT = "__not_object"

_ISO_LIKE = r"^[+-]?[0-9]{4}(-|$)"


def q(name: str) -> str:
    """A Spark SQL identifier (the one quoting rule: :func:`radstack.sql_text.quote_identifier`)."""
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


def _from_json(raw: DataFrame, fields: list[str], value_col: str) -> tuple[DataFrame, str, str]:
    """The parsed fields beside the original bytes and Kafka coordinates (Spark's ``from_json``), and
    the SQL conditions of an empty message and of malformed JSON (or not an object)."""
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    cols = set(raw.columns)
    meta = [F.col(value_col).cast("binary").alias(RAW_COLUMN)]
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
    ).select(*META_COLUMNS, F.col("__j").isNull().alias(_NOT_OBJECT), "__j.*")
    raw_col = q(RAW_COLUMN)
    return flat, f"{raw_col} IS NULL OR length({raw_col}) = 0", f"{q(CORRUPT_COLUMN)} IS NOT NULL OR {_NOT_OBJECT}"


def _read_json(raw: DataFrame, fields: list[str], value_col: str) -> tuple[DataFrame, str, str]:
    """:func:`_from_json` for jobs that keep no dead letters (the batch layer): the same fields and
    the event's size, without the original bytes or Kafka coordinates (NULL), about 1.5× as fast.

    Spark's ``from_json`` (4.0–4.2) reads every value through a new ``InputStreamReader`` — an 8 KB
    buffer per row, a third of its time here — while its JSON reader over a ``Dataset[String]``
    parses the same way with the same parser (:class:`JacksonParser`, PERMISSIVE) from the string.
    That reader sees only the string, so the size rides in it: a value that opens an object gets
    ``"\\u0000b": <size>`` as its first member (the rest of the text is untouched, so it parses
    exactly as ``from_json`` parses it, trailing text included); any other value (an array, a
    scalar, nothing) becomes ``{"\\u0000b": <size>, "\\u0000n": true}`` — not an object. (An event
    with a member of either name is the one input the two read differently.)"""
    from pyspark.sql import DataFrame as SparkDataFrame  # lazy: only Spark code paths load pyspark
    from pyspark.sql import functions as F  # lazy: as above
    from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

    ws = r"[ \t\n\r]*"  # JSON's whitespace
    value = F.coalesce(F.col(value_col).cast("binary"), F.lit(bytearray()))
    size = F.length(value).cast("string").cast("binary")
    text = value.cast("string")
    brace = F.instr(text, "{")  # after whitespace only, where it is used: a character is a byte
    first_member = F.concat(F.lit(bytearray(rb'{"\u0000b":')), size)
    rewritten = (
        F.when(F.substring(value, 1, 2) == F.lit(bytearray(b'{"')),  # nearly every event: no regex
               F.concat(first_member, F.lit(bytearray(b",")), F.substring(value, 2, 2**31 - 1)))
        .when(text.rlike(rf"^{ws}\{{{ws}\}}"), F.concat(first_member, F.substring(text, brace + 1, 2**31 - 1).cast("binary")))
        .when(text.rlike(rf"^{ws}\{{"),
              F.concat(first_member, F.lit(bytearray(b",")), F.substring(text, brace + 1, 2**31 - 1).cast("binary")))
        .otherwise(F.concat(first_member, F.lit(bytearray(rb',"\u0000n":true}'))))
    )  # fmt: skip
    schema = StructType(
        [StructField("\x00b", LongType()), StructField("\x00n", BooleanType()),
         *[StructField(f, StringType()) for f in fields], StructField(CORRUPT_COLUMN, StringType())]
    )  # fmt: skip
    spark = raw.sparkSession
    names = (BYTES_COLUMN, _NOT_OBJECT, *fields, CORRUPT_COLUMN)
    if is_connect(spark):
        # a Spark Connect session has no JVM in this process to hand the Dataset[String] to: from_json
        # parses the same text with the same parser and options (the slower per-row path above)
        options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN}
        flat = raw.select(F.from_json(rewritten.cast("string"), schema, options).alias("j")).select("j.*").toDF(*names)
    else:
        # PySpark's DataFrameReader.json takes paths or an RDD (rows through Python); the JVM reader
        # takes the Dataset[String] directly
        jvm = spark._jvm  # type: ignore[attr-defined]
        strings = getattr(raw.select(rewritten.cast("string").alias("value"))._jdf, "as")(jvm.org.apache.spark.sql.Encoders.STRING())
        reader = (spark._jsparkSession.read().schema(jvm.org.apache.spark.sql.types.DataType.fromJson(schema.json()))  # type: ignore[attr-defined]
                  .option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT_COLUMN))  # fmt: skip
        flat = SparkDataFrame(reader.json(strings), spark).toDF(*names)
    # malformed JSON: the size is still the rewritten text's first member
    bad = F.col(CORRUPT_COLUMN)
    size_of_bad = F.when(bad.isNotNull(), F.regexp_extract(bad, r'^\{"\\u0000b":([0-9]+)', 1).cast("bigint"))
    flat = flat.withColumn(BYTES_COLUMN, F.coalesce(F.col(BYTES_COLUMN), size_of_bad))
    flat = flat.select(*[F.lit(None).cast(t).alias(c) for c, t in zip(META_COLUMNS, ("binary", "string", "int", "bigint"),
                                                                       strict=True)], "*")  # fmt: skip
    return flat, f"{q(BYTES_COLUMN)} = 0", f"{q(CORRUPT_COLUMN)} IS NOT NULL OR {_NOT_OBJECT} IS NOT NULL"


def _from_columns(raw: DataFrame, fields: list[str], value_col: str) -> tuple[DataFrame, str, str]:
    """:func:`_read_json`'s rows, reading each parsed record (the parsed archive's ``parsed`` flag) from
    its typed columns instead of its JSON: a field's text is its one kind's value as Spark writes it
    (a long's digits, a double as ``Double.toString``, ``true``/``false``) — what the JSON reader
    gives for it. Every other record (not parsed, or an archive without the columns) goes through
    :func:`_read_json`."""
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    flag = F.coalesce(F.col(f"`{PARSED_COLUMN}`"), F.lit(False))
    rest, empty, malformed = _read_json(raw.where(~flag), fields, value_col)
    types = dict(zip(META_COLUMNS, ("binary", "string", "int", "bigint"), strict=True))

    def text(f: str) -> Column:
        return F.coalesce(*[F.col(f"`{parsed_column(kind, f)}`").cast("string") for kind in PARSED_KINDS])

    columns = raw.where(flag).select(
        *[F.lit(None).cast(t).alias(c) for c, t in types.items()],
        F.length(F.col(value_col)).cast("bigint").alias(BYTES_COLUMN),
        F.lit(None).cast("boolean").alias(_NOT_OBJECT),
        *[text(f).alias(f) for f in fields],
        F.lit(None).cast("string").alias(CORRUPT_COLUMN),
    )
    return columns.unionByName(rest), empty, malformed


def parse_events(
    raw: DataFrame, spec: DatasourceSpec, *, value_col: str = "value", sizes: bool = False, keep_raw: bool = True
) -> DataFrame:
    """Parse the JSON in ``raw[value_col]`` (binary or string) and validate it against ``spec``.

    The result has the spec's input fields (typed), ``__time`` (BIGINT millis), ``__reason``
    (NULL = valid), ``__raw`` (the original bytes) and ``__topic``/``__partition``/``__offset`` when
    the input has Kafka's ``topic``/``partition``/``offset`` columns (NULL otherwise); with ``sizes``,
    also ``__bytes`` (the event's size in bytes, for the ``processedBytes`` stat). ``keep_raw=False``
    (jobs that keep no dead letters): ``__raw`` and the Kafka coordinates are NULL, and the JSON is
    parsed by Spark's JSON reader instead of ``from_json`` (:func:`_read_json`: same rows, faster) —
    or not parsed at all where ``raw`` has the parsed archive's columns (:func:`_from_columns`)."""
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    ds = spec.data_schema
    fields = input_fields(spec)
    types = field_types(spec)
    ts = ds.timestamp_spec
    reader = _from_json if keep_raw else (_from_columns if PARSED_COLUMN in raw.columns else _read_json)
    flat, empty, malformed = reader(raw, fields, value_col)

    ts_col = q(ts.column)
    trimmed = f"trim({ts_col})"
    ts_expr = timestamp_sql(trimmed, ts.format)
    time_col = _joda_udf(ts.format)(F.col(ts.column)) if ts_expr is None else F.expr(ts_expr)
    if ts.missing_value is not None:
        time_col = F.when(F.col(ts.column).isNull(), F.lit(ts.missing_value).cast("bigint")).otherwise(time_col)
    flat = flat.withColumn("__t", time_col.cast("bigint"))

    reasons: list[tuple[str, str]] = [
        (empty, "'empty message'"),
        (malformed, "'malformed JSON'"),
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
            (f"{c} IS NOT NULL AND {numeric_cast_sql(c, 'string', t, 'spark')} IS NULL",
             f"concat({_lit(f'field {f}: ' + chr(39))}, {c}, {_lit(chr(39) + f' is not a {t}')})")
        )
    case = "CASE " + " ".join(f"WHEN {cond} THEN {msg}" for cond, msg in reasons) + " END"
    out_cols: list[Column] = []
    for f in fields:
        t = types[f]
        out_cols.append(F.expr(numeric_cast_sql(q(f), "string", t, "spark")).alias(f) if t not in ("string", "json") else F.col(q(f)).alias(f))
    return flat.select(
        F.inline(
            F.array(
                F.struct(
                    *out_cols,
                    F.col("__t").alias(TIME_COLUMN),
                    *([(F.length(F.col(RAW_COLUMN)).cast("bigint") if keep_raw else F.col(BYTES_COLUMN)).alias(BYTES_COLUMN)]
                      if sizes else []),
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
