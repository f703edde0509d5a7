"""Druid plans a SELECT over a datasource that neither groups nor aggregates as a *scan*, and a scan
can only be ordered by ``__time``: any other ORDER BY is refused at planning time. This rule refuses
the same statements with Druid's message, so a query that works here also works on Druid.

A block is a plain scan when it reads one datasource directly (no join but ``UNNEST``, no subquery or
CTE in its FROM), has no GROUP BY, HAVING, DISTINCT, aggregate or window function. Ordering such a block by
``__time`` alone (either direction, by name, by an alias of it or by its position in the select list) is
fine; any ORDER BY that names something else is not. A subquery's ORDER BY without LIMIT or OFFSET is
not checked: Calcite drops it (it cannot order the outer answer), and so Druid plans the statement."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.rules import aggregates, block_nodes
from serving.broker.sql.translation_context import TranslationContext
from serving.errors import DruidError


def check_scan_order(tree: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    for select in tree.find_all(exp.Select):
        order = select.args.get("order")
        if order is None or not _plain_scan(select, ctx) or _dropped_sort(select, tree):
            continue
        keys = [o.this for o in order.expressions]
        if all(_is_time(k, select) for k in keys):
            continue
        names = ", ".join(k.name if isinstance(k, exp.Column) else k.sql(dialect="druid") for k in keys)
        raise DruidError(
            "Query could not be planned. A possible reason is [SQL query requires ordering a table by "
            f"non-time column [[{names}]], which is not supported.]",
            category="INVALID_INPUT", error_code="general", persona="ADMIN",
            context={"legacyErrorCode": "Plan validation failed"})
    return tree


def _is_time(key: exp.Expression, select: exp.Select) -> bool:
    """``__time`` itself, a select alias of it, or ``ORDER BY n`` naming it in the select list."""
    projections = select.expressions
    if isinstance(key, exp.Literal) and key.is_int and 1 <= int(key.name) <= len(projections):
        key = projections[int(key.name) - 1]
    elif isinstance(key, exp.Column) and not key.table:
        key = next((p for p in projections if isinstance(p, exp.Alias) and p.alias == key.name), key)
    key = key.this if isinstance(key, exp.Alias) else key
    return isinstance(key, exp.Column) and key.name == "__time"


def _dropped_sort(select: exp.Select, tree: exp.Expression) -> bool:
    """A subquery's sort with no LIMIT/OFFSET, which Calcite removes."""
    if select is tree or select.args.get("limit") or select.args.get("offset"):
        return False
    outer = select.parent
    while isinstance(outer, exp.Union | exp.Intersect | exp.Except | exp.Paren):
        if outer is tree:
            return False
        outer = outer.parent
    return outer is not None


def _plain_scan(select: exp.Select, ctx: TranslationContext) -> bool:
    joins = select.args.get("joins") or []
    if any(not isinstance(j.this, exp.Unnest) for j in joins):  # a scan of an UNNEST is a scan too
        return False
    if select.args.get("having") or select.args.get("distinct"):
        return False
    source = select.args.get("from_")
    table = source.this if source is not None else None
    if not isinstance(table, exp.Table) or table.name not in ctx.datasources or table.name in ctx.cte_names:
        return False
    if aggregates(select):
        return False
    return not any(isinstance(n, exp.Window) for n in block_nodes(select, select))
