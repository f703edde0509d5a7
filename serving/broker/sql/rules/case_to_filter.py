"""Calcite rewrites ``SUM(CASE WHEN c THEN 1 ELSE 0 END)`` into ``COUNT(*) FILTER (WHERE c)`` before
Druid plans it, so over no rows Druid answers 0 where a plain SUM gives NULL. This rule makes the same
rewrite (keeping an outer ``FILTER``: both conditions must hold)."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.context import TranslationContext


def _is(e: exp.Expression | None, value: int) -> bool:
    return isinstance(e, exp.Literal) and not e.is_string and str(e.this) == str(value)


def case_to_filter(node: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    outer = node if isinstance(node, exp.Filter) else None
    agg = node.this if outer is not None else node
    if not isinstance(agg, exp.Sum) or (outer is None and isinstance(node.parent, exp.Filter)):
        return node
    case = agg.this
    if not isinstance(case, exp.Case) or case.this is not None or len(case.args.get("ifs") or []) != 1:
        return node
    when = case.args["ifs"][0]
    if not (_is(when.args.get("true"), 1) and _is(case.args.get("default"), 0)):
        return node
    cond = when.this.copy()
    if outer is not None:
        cond = exp.and_(outer.expression.this.copy() if isinstance(outer.expression, exp.Where) else
                        outer.expression.copy(), cond)
    return exp.Filter(this=exp.Count(this=exp.Star()), expression=exp.Where(this=cond))


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = case_to_filter
ORDER = 10
