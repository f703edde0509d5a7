"""``REPEAT``, ``LPAD`` and ``RPAD`` may not build strings longer than ``server.max_string_bytes``.

``SELECT REPEAT('x', 2000000000)`` once held the server at 13 GB for 92 s. The rewrite wraps the count (or
length) in a check: past the limit DuckDB's ``error()`` fails the query with an invalid-input error (400)
before the string is built, at planning time when the arguments are constants, else per row."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.context import TranslationContext


def _capped(value: exp.Expression, over: exp.Expression, ctx: TranslationContext, name: str) -> exp.Expression:
    """``value``, or DuckDB's ``error(…)`` when ``over`` holds (folded at planning time when constant)."""
    message = exp.Literal.string(
        f"{name} would build a string longer than {ctx.max_string_bytes:,} bytes (server.max_string_bytes)")
    return exp.Case(ifs=[exp.If(this=over, true=exp.Anonymous(this="error", expressions=[message]))], default=value)


def _bigint(e: exp.Expression) -> exp.Expression:
    return exp.Cast(this=e, to=exp.DataType.build("BIGINT"))


def string_limits(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if not isinstance(node, exp.Repeat | exp.Pad):
        return node
    cap = exp.Literal.number(ctx.max_string_bytes)
    if isinstance(node, exp.Repeat):
        times = node.args["times"]
        length = exp.Anonymous(this="octet_length", expressions=[
            exp.Anonymous(this="encode", expressions=[exp.Cast(this=node.this.copy(), to=exp.DataType.build("TEXT"))])])
        over = exp.GT(this=exp.Mul(this=_bigint(length), expression=_bigint(times.copy())), expression=cap)
        node.set("times", _capped(times.copy(), over, ctx, "REPEAT"))
    else:
        length = node.expression
        over = exp.GT(this=_bigint(length.copy()), expression=cap)
        node.set("expression", _capped(length.copy(), over, ctx, "LPAD" if node.args.get("is_left") else "RPAD"))
    return node


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = string_limits
ORDER = 140
EMITS = frozenset({"ENCODE", "ERROR", "OCTET_LENGTH"})
