"""``STRING_AGG``/``LISTAGG``/``ARRAY_AGG``/``ARRAY_CONCAT_AGG`` with ``DISTINCT`` give their values in
ascending order, as Druid's sorted sets do (a type rule of :mod:`serving.broker.sql.type_rules`):
DuckDB would give them in arrival order. ``LISTAGG(DISTINCT x, sep)`` arrives with the separator inside
the DISTINCT and is split back into ``STRING_AGG(DISTINCT x ORDER BY x, sep)``."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.rules import anonymous_name, concatenated_arrays
from serving.broker.sql.translation_context import TranslationContext


def _sorted(distinct: exp.Distinct) -> exp.Order:
    first = distinct.expressions[0]
    return exp.Order(this=distinct, expressions=[exp.Ordered(this=first.copy(), nulls_first=True)])


def distinct_aggregates(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    if isinstance(node, exp.GroupConcat | exp.ArrayAgg) and isinstance(node.this, exp.Distinct):
        node.set("this", _sorted(node.this))
        return node
    if isinstance(node, exp.ArrayConcatAgg) and isinstance(node.this, exp.Distinct):
        return concatenated_arrays(node.this.expressions[0], distinct=True)
    name = anonymous_name(node)
    if name in ("LISTAGG", "STRING_AGG") and len(node.expressions) == 1 \
            and isinstance(node.expressions[0], exp.Distinct) and len(node.expressions[0].expressions) >= 2:
        value, separator, *_ = node.expressions[0].expressions
        return exp.GroupConcat(this=_sorted(exp.Distinct(expressions=[value.copy()])), separator=separator.copy())
    if name == "ARRAY_CONCAT_AGG" and node.expressions and isinstance(node.expressions[0], exp.Distinct):
        return concatenated_arrays(node.expressions[0].expressions[0], distinct=True)
    return node


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = distinct_aggregates
#: the node classes it rewrites besides the anonymous calls of ACCEPTS (the rest pass it by)
HANDLES: tuple[type[exp.Expression], ...] = (exp.ArrayAgg, exp.ArrayConcatAgg, exp.GroupConcat)
#: anonymous calls it also reads though another rule translates them
READS = frozenset({'LISTAGG'})
EMITS = frozenset({"LIST_SORT", "LIST_DISTINCT", "FLATTEN", "LIST", "LEN", "LIST_COUNT", "LIST_PREPEND"})
EMITS_CLASSES = (exp.Order, exp.Ordered)
