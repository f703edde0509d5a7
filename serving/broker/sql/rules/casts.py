"""CASTs with Druid's meaning: TIMESTAMP → BIGINT gives epoch millis and back; TIMESTAMP → VARCHAR is
``2000-01-02 03:04:05``; string → TIMESTAMP reads ``2000-01-02 03:04:05`` (or ISO) and gives NULL
when it cannot (TRY_CAST); a floating-point number → an integer type truncates toward zero as Java
does (``CAST(2.7 AS BIGINT)`` is 2, where DuckDB rounds to 3)."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.context import TranslationContext
from serving.broker.sql.rules.typing import is_integer, is_timestamp
from serving.broker.sql.timeexpr import call, from_millis, to_millis

_INTS = exp.DataType.INTEGER_TYPES
_TEXT = {exp.DType.VARCHAR, exp.DType.TEXT, exp.DType.CHAR, exp.DType.NVARCHAR, exp.DType.NCHAR}
_TS = {exp.DType.TIMESTAMP, exp.DType.TIMESTAMPNTZ, exp.DType.DATETIME}
_FLOATS = {exp.DType.DOUBLE, exp.DType.FLOAT, exp.DType.DECIMAL}


def casts(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if not isinstance(node, exp.Cast) or isinstance(node, exp.TryCast):
        return node
    target = node.to.this
    src = node.this
    if target in _INTS and is_timestamp(src):
        return exp.cast(to_millis(src), node.to)
    if target in _INTS and getattr(src, "type", None) is not None and src.type.this in _FLOATS:
        negative = exp.If(this=exp.LT(this=src.copy(), expression=exp.Literal.number(0)), true=exp.Ceil(this=src.copy()))
        return exp.Cast(this=exp.Case(ifs=[negative], default=exp.Floor(this=src.copy())), to=node.to.copy())
    if target in _TS and is_integer(src):
        return from_millis(src)
    if target in _TEXT and is_timestamp(src):
        return call("STRFTIME", src, exp.Literal.string("%Y-%m-%d %H:%M:%S"))
    if target in _TS and not (isinstance(src, exp.Literal) and src.is_string) and not is_timestamp(src):
        return exp.TryCast(this=src, to=node.to)
    return node


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
EMITS = frozenset({"STRFTIME"})
