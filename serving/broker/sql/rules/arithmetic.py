"""Integer arithmetic as in Druid (Calcite), by the rules of :mod:`serving.broker.sql.type_rules`:
``BIGINT / BIGINT`` truncates (DuckDB's ``//``), ``DIV(a, b)`` is integer division, and
``SAFE_DIVIDE`` over two LONGs is a LONG (NULL when the divisor is 0)."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.context import TranslationContext
from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import anonymous_name
from serving.broker.sql.type_rules import integer_arithmetic


def arithmetic(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if isinstance(node, exp.Div) and integer_arithmetic(node.this, node.expression):
        return exp.IntDiv(this=node.this, expression=node.expression)
    if isinstance(node, exp.SafeDivide) and integer_arithmetic(node.this, node.expression):
        zero = exp.EQ(this=node.expression.copy(), expression=exp.Literal.number(0))
        quotient = exp.IntDiv(this=node.this.copy(), expression=node.expression.copy())
        return exp.paren(exp.Case(ifs=[exp.If(this=zero, true=exp.null())], default=quotient), copy=False)
    if anonymous_name(node) == "DIV":
        if len(node.expressions) != 2:
            raise validation_error("DIV takes 2 arguments")
        a, b = node.expressions
        return exp.paren(exp.IntDiv(this=a, expression=b), copy=False)
    return node


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
ACCEPTS = frozenset({"DIV"})
