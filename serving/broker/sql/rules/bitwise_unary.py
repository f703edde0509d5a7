"""``BITWISE_COMPLEMENT(x)``, ``BITWISE_SHIFT_RIGHT(x, n)`` and ``BITWISE_SHIFT_LEFT(x, n)``: Java's ``~x``,
``x >> n`` and ``x << n`` on longs (the shift count taken modulo 64, a left shift wrapping around in two's
complement as Java's does, where DuckDB's ``<<`` refuses overflow and negative numbers; NULL in, NULL out)."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.rules import anonymous_name, call_args
from serving.broker.sql.translation_context import TranslationContext


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
    if name == "BITWISE_SHIFT_LEFT":
        x, n = call_args(node, (2,), name)
        count = exp.paren(exp.BitwiseAnd(this=_long(n), expression=exp.Literal.number(63)), copy=False)
        power = exp.BitwiseLeftShift(this=exp.cast(exp.Literal.number(1), "HUGEINT"), expression=count)
        product = exp.Mul(this=exp.cast(x, "HUGEINT"), expression=exp.paren(power, copy=False))
        two64 = exp.Literal.number(2**64)
        low = exp.Mod(this=exp.paren(exp.Add(this=exp.Mod(this=exp.paren(product), expression=two64),
                                             expression=two64.copy())), expression=two64.copy())  # [0, 2^64)
        signed = exp.Case(ifs=[exp.If(this=exp.GTE(this=low.copy(), expression=exp.Literal.number(2**63)),
                                      true=exp.Sub(this=low.copy(), expression=two64.copy()))], default=low)
        return exp.cast(signed, "BIGINT")
    return node


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = bitwise_unary
#: the node classes it rewrites besides the anonymous calls of ACCEPTS (the rest pass it by)
HANDLES: tuple[type[exp.Expression], ...] = ()
ACCEPTS = frozenset({"BITWISE_COMPLEMENT", "BITWISE_SHIFT_RIGHT", "BITWISE_SHIFT_LEFT"})
