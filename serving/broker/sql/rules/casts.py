"""CASTs with Druid's meaning: TIMESTAMP → BIGINT gives epoch millis and back; TIMESTAMP → VARCHAR is
``2000-01-02 03:04:05``; string → TIMESTAMP reads ``2000-01-02 03:04:05`` (or ISO) and gives NULL
when it cannot (TRY_CAST); a floating-point number → an integer type truncates toward zero as Java
does (``CAST(2.7 AS BIGINT)`` is 2, where DuckDB rounds to 3); a BOOLEAN → VARCHAR is ``1``/``0`` (Druid's
booleans are longs) and → a number is refused, as Calcite refuses it."""

from __future__ import annotations

from datetime import datetime

from sqlglot import exp

from radstack.time.joda import zone
from radstack.time.sql import is_utc_zone
from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules.implicit_casts import text_number, value_text
from serving.broker.sql.timeexpr import from_millis, to_millis, ts_literal
from serving.broker.sql.translation_context import TranslationContext
from serving.broker.sql.type_rules import (
    FLOATING,
    INTEGER,
    TEXT,
    TIMESTAMPS,
    druid_type,
    is_floating,
    is_integer,
    is_text,
    is_timestamp,
)

#: sqlglot's type names that Calcite spells otherwise in its messages
_SQL_NAMES = {"INT": "INTEGER"}


def casts(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if not isinstance(node, exp.Cast) or isinstance(node, exp.TryCast):
        return node
    target = node.to.this
    src = node.this
    if target in TIMESTAMPS and isinstance(src, exp.Literal) and src.is_string and not is_utc_zone(ctx.time_zone):
        return _zoned_literal(str(src.this), ctx.time_zone) or node
    if target == exp.DType.DATE and isinstance(src, exp.Literal) and src.is_string and not is_utc_zone(ctx.time_zone):
        # a DATE literal is that day's start in the session's zone (Druid compares it as that instant)
        return _zoned_literal(str(src.this).strip()[:10] + " 00:00:00", ctx.time_zone) or node
    if druid_type(src) == "BOOLEAN" and (target in INTEGER or target in FLOATING):
        # Calcite's validation: a BOOLEAN does not cast to a number (CASE WHEN … THEN 1 ELSE 0 END does)
        name = _SQL_NAMES.get(target.value, target.value)
        raise validation_error(f"Cast function cannot convert value of type BOOLEAN to type {name}")
    if druid_type(src) == "BOOLEAN" and target in TEXT:  # Druid's booleans are longs: '1' / '0'
        return exp.cast(exp.cast(src, "BIGINT"), node.to)
    if target in INTEGER and is_timestamp(src):
        return exp.cast(to_millis(src), node.to)
    if target in INTEGER and is_floating(src):
        negative = exp.If(this=exp.LT(this=src.copy(), expression=exp.Literal.number(0)), true=exp.Ceil(this=src.copy()))
        return exp.Cast(this=exp.Case(ifs=[negative], default=exp.Floor(this=src.copy())), to=node.to.copy())
    if target in TIMESTAMPS and is_integer(src):
        return from_millis(src)
    if target in TEXT and is_timestamp(src):
        return value_text(src, ctx)
    if target in TEXT and is_floating(src):  # as Java writes a double (2.434E8); a decimal literal is one in Druid
        return value_text(src, ctx)
    if target in TIMESTAMPS and not (isinstance(src, exp.Literal) and src.is_string) and not is_timestamp(src):
        return exp.TryCast(this=src, to=node.to)
    if (target in INTEGER or target in FLOATING) and is_text(src):
        return exp.cast(text_number(src, integer=target in INTEGER), node.to)
    if target == exp.DType.BOOLEAN and is_text(src):  # Druid reads the text as a number: NULL unless it is one
        return exp.NEQ(this=text_number(src, integer=False), expression=exp.Literal.number(0))
    return node


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----


def _zoned_literal(text: str, tz: str) -> exp.Expression | None:
    """A TIMESTAMP literal read as Druid reads it: wall-clock time in the session's ``sqlTimeZone``."""
    try:
        local = datetime.fromisoformat(text.strip().replace(" ", "T"))
    except ValueError:
        return None
    if local.tzinfo is None:
        local = local.replace(tzinfo=zone(tz))
    return ts_literal(int(local.timestamp() * 1000))
