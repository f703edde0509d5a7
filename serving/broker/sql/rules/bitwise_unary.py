"""``BITWISE_COMPLEMENT(x)`` and ``BITWISE_SHIFT_RIGHT(x, n)``: Java's ``~x`` and ``x >> n`` on longs (the
shift count taken modulo 64, as Java does; NULL in, NULL out)."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.context import TranslationContext
from serving.broker.sql.rules import anonymous_name, call_args


def _long(e: exp.Expression) -> exp.Expression:
    return exp.cast(e, exp.DataType.build("BIGINT"))


def bitwise_unary(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    name = anonymous_name(node)
    if name == "BITWISE_COMPLEMENT":
        (x,) = call_args(node, (1,), name)
        return exp.paren(exp.BitwiseNot(this=_long(x)), copy=False)
    if name == "BITWISE_SHIFT_RIGHT":
        x, n = call_args(node, (2,), name)
        count = exp.paren(exp.BitwiseAnd(this=_long(n), expression=exp.Literal.number(63)), copy=False)
        return exp.paren(exp.BitwiseRightShift(this=_long(x), expression=count), copy=False)
    return node


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = bitwise_unary
ORDER = 135
ACCEPTS = frozenset({"BITWISE_COMPLEMENT", "BITWISE_SHIFT_RIGHT"})
