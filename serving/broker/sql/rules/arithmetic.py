"""Integer arithmetic as in Druid (Calcite): ``BIGINT / BIGINT`` truncates (DuckDB's ``//``), and
``DIV(a, b)`` is integer division."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.context import TranslationContext
from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import anonymous_name
from serving.broker.sql.rules.typing import is_integer


def arithmetic(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if isinstance(node, exp.Div) and is_integer(node.this) and is_integer(node.expression):
        return exp.IntDiv(this=node.this, expression=node.expression)
    if anonymous_name(node) == "DIV":
        if len(node.expressions) != 2:
            raise validation_error("DIV takes 2 arguments")
        a, b = node.expressions
        return exp.paren(exp.IntDiv(this=a, expression=b), copy=False)
    return node


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
ACCEPTS = frozenset({"DIV"})
