"""Calcite rewrites ``SUM(CASE WHEN c THEN 1 ELSE 0 END)`` into ``COUNT(*) FILTER (WHERE c)`` before
Druid plans it, so over no rows Druid answers 0 where a plain SUM gives NULL. This rule makes the same
rewrite (keeping an outer ``FILTER``: both conditions must hold).

Calcite first simplifies the CASE with what the WHERE clause guarantees: under ``WHERE x IS NULL`` a
comparison of ``x`` with a value is never true, the CASE is the constant 0 and the aggregate stays a
SUM (NULL over no rows). This rule leaves such a SUM alone."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.translation_context import TranslationContext


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
    if _never_true(when.this, _null_columns(node)):
        return node
    cond = when.this.copy()
    if outer is not None:
        cond = exp.and_(outer.expression.this.copy() if isinstance(outer.expression, exp.Where) else
                        outer.expression.copy(), cond)
    return exp.Filter(this=exp.Count(this=exp.Star()), expression=exp.Where(this=cond))


def _null_columns(node: exp.Expression) -> set[str]:
    """Columns the enclosing SELECT's WHERE requires to be NULL (``x IS NULL`` conjuncts)."""
    select = node.find_ancestor(exp.Select)
    where = select.args.get("where") if select is not None else None
    if where is None:
        return set()
    condition = where.this.unnest()
    conjuncts = list(condition.flatten()) if isinstance(condition, exp.And) else [condition]
    return {c.this.name for c in conjuncts if isinstance(c, exp.Is) and isinstance(c.this, exp.Column)
            and isinstance(c.expression, exp.Null)}


def _never_true(cond: exp.Expression, null_columns: set[str]) -> bool:
    """A comparison of a column the WHERE makes NULL with a literal: unknown on every row."""
    return (bool(null_columns) and isinstance(cond, exp.EQ | exp.NEQ | exp.GT | exp.GTE | exp.LT | exp.LTE)
            and isinstance(cond.this, exp.Column) and cond.this.name in null_columns
            and isinstance(cond.expression, exp.Literal))


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
FUNCTION_RULE = case_to_filter
#: the node classes it rewrites besides the anonymous calls of ACCEPTS (the rest pass it by)
HANDLES: tuple[type[exp.Expression], ...] = (exp.Filter, exp.Sum)
