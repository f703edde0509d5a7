"""CASTs with Druid's meaning: TIMESTAMP → BIGINT gives epoch millis and back; TIMESTAMP → VARCHAR is
``2000-01-02 03:04:05``; string → TIMESTAMP reads ``2000-01-02 03:04:05`` (or ISO) and gives NULL
when it cannot (TRY_CAST); a floating-point number → an integer type truncates toward zero as Java
does (``CAST(2.7 AS BIGINT)`` is 2, where DuckDB rounds to 3)."""

from __future__ import annotations

from datetime import datetime

from sqlglot import exp

from radstack.time.joda import zone
from radstack.time.sql import is_utc_zone
from radstack.value_sql import numeric_cast_sql
from serving.broker.sql.context import TranslationContext
from serving.broker.sql.rules.implicit_casts import number_literal
from serving.broker.sql.timeexpr import call, from_millis, to_millis, ts_literal
from serving.broker.sql.type_rules import (
    FLOATING,
    INTEGER,
    TEXT,
    TIMESTAMPS,
    is_decimal,
    is_floating,
    is_integer,
    is_text,
    is_timestamp,
)


def casts(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if not isinstance(node, exp.Cast) or isinstance(node, exp.TryCast):
        return node
    target = node.to.this
    src = node.this
    if target in TIMESTAMPS and isinstance(src, exp.Literal) and src.is_string and not is_utc_zone(ctx.time_zone):
        return _zoned_literal(str(src.this), ctx.time_zone) or node
    if target in INTEGER and is_timestamp(src):
        return exp.cast(to_millis(src), node.to)
    if target in INTEGER and is_floating(src):
        negative = exp.If(this=exp.LT(this=src.copy(), expression=exp.Literal.number(0)), true=exp.Ceil(this=src.copy()))
        return exp.Cast(this=exp.Case(ifs=[negative], default=exp.Floor(this=src.copy())), to=node.to.copy())
    if target in TIMESTAMPS and is_integer(src):
        return from_millis(src)
    if target in TEXT and is_timestamp(src):
        return call("STRFTIME", src, exp.Literal.string("%Y-%m-%d %H:%M:%S"))
    if target in TEXT and is_floating(src) and not is_decimal(src):  # as Java writes a double: 2.434E8
        udf = "DRUID_FLOAT_TEXT" if src.type.is_type(exp.DataType.Type.FLOAT) else "DRUID_DOUBLE_TEXT"
        ctx.udfs.add(udf)
        return call(udf, exp.cast(src, "FLOAT" if udf == "DRUID_FLOAT_TEXT" else "DOUBLE"))
    if target in TIMESTAMPS and not (isinstance(src, exp.Literal) and src.is_string) and not is_timestamp(src):
        return exp.TryCast(this=src, to=node.to)
    if (target in INTEGER or target in FLOATING) and is_text(src):
        return _text_to_number(src, node.to, integer=target in INTEGER)
    return node


def _text_to_number(src: exp.Expression, to: exp.DataType, integer: bool) -> exp.Expression:
    """Text → a number as Druid converts it: trimmed, NULL when it is not a number, a decimal truncated
    toward zero for an integer type (``CAST('1.9' AS BIGINT)`` is 1; DuckDB refuses both)."""
    if isinstance(src, exp.Literal) and src.is_string:
        return exp.cast(number_literal(str(src.this), integer), to)
    sql = numeric_cast_sql(src.sql("duckdb"), "string", "long" if integer else "double")
    return exp.cast(exp.maybe_parse(sql, dialect="duckdb"), to)


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
EMITS = frozenset({"STRFTIME", "DRUID_DOUBLE_TEXT", "DRUID_FLOAT_TEXT"})
EMITS_CLASSES = (exp.RegexpFullMatch, exp.Trunc, exp.Trim)  # radstack.value_sql.numeric_cast_sql


def _zoned_literal(text: str, tz: str) -> exp.Expression | None:
    """A TIMESTAMP literal read as Druid reads it: wall-clock time in the session's ``sqlTimeZone``."""
    try:
        local = datetime.fromisoformat(text.strip().replace(" ", "T"))
    except ValueError:
        return None
    if local.tzinfo is None:
        local = local.replace(tzinfo=zone(tz))
    return ts_literal(int(local.timestamp() * 1000))
