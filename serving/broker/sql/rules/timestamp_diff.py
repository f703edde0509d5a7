"""TIMESTAMPDIFF(unit, t1, t2): whole units from t1 to t2 (Calcite), DuckDB's ``date_sub``."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import anonymous_name
from serving.broker.sql.rules.time_shift import time_unit
from serving.broker.sql.timeexpr import call
from serving.broker.sql.translation_context import TranslationContext


def timestamp_diff(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if anonymous_name(node) != "TIMESTAMPDIFF":
        return node
    args = node.expressions
    if len(args) != 3:
        raise validation_error("TIMESTAMPDIFF takes 3 arguments")
    unit = time_unit(args[0], "TIMESTAMPDIFF").lower()
    return call("DATE_SUB", exp.Literal.string(unit), args[1], args[2])


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = timestamp_diff
#: the node classes it rewrites besides the anonymous calls of ACCEPTS (the rest pass it by)
HANDLES: tuple[type[exp.Expression], ...] = ()
ACCEPTS = frozenset({"TIMESTAMPDIFF"})
EMITS = frozenset({"DATE_SUB"})
