"""CASTs with Druid's meaning: TIMESTAMP → BIGINT gives epoch millis and back; TIMESTAMP → VARCHAR is
``2000-01-02 03:04:05``; string → TIMESTAMP reads ``2000-01-02 03:04:05`` (or ISO) and gives NULL
when it cannot (TRY_CAST); a floating-point number → an integer type truncates toward zero as Java
does (``CAST(2.7 AS BIGINT)`` is 2, where DuckDB rounds to 3)."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.context import TranslationContext
from serving.broker.sql.timeexpr import call, from_millis, to_millis
from serving.broker.sql.type_rules import INTEGER, TEXT, TIMESTAMPS, is_floating, is_integer, is_timestamp


def casts(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if not isinstance(node, exp.Cast) or isinstance(node, exp.TryCast):
        return node
    target = node.to.this
    src = node.this
    if target in INTEGER and is_timestamp(src):
        return exp.cast(to_millis(src), node.to)
    if target in INTEGER and is_floating(src):
        negative = exp.If(this=exp.LT(this=src.copy(), expression=exp.Literal.number(0)), true=exp.Ceil(this=src.copy()))
        return exp.Cast(this=exp.Case(ifs=[negative], default=exp.Floor(this=src.copy())), to=node.to.copy())
    if target in TIMESTAMPS and is_integer(src):
        return from_millis(src)
    if target in TEXT and is_timestamp(src):
        return call("STRFTIME", src, exp.Literal.string("%Y-%m-%d %H:%M:%S"))
    if target in TIMESTAMPS and not (isinstance(src, exp.Literal) and src.is_string) and not is_timestamp(src):
        return exp.TryCast(this=src, to=node.to)
    return node


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
EMITS = frozenset({"STRFTIME"})
