"""Druid (Calcite with Druid's conformance) does not let GROUP BY name a SELECT alias: ``SELECT
UPPER(page) AS p … GROUP BY p`` is refused with ``Column 'p' not found in any table`` (group by the
expression or its ordinal instead); nor a window's ``PARTITION BY`` / ``ORDER BY``. DuckDB would accept it, so this rule refuses the same statements,
and a query that works here also works on Druid.

Checked per SELECT block whose sources' columns are known (datasources, subqueries and CTEs with
named outputs); an alias that is also a column of a source is that column, as in Druid."""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.errors import column_not_found
from serving.broker.sql.translation_context import TranslationContext


def _window_keys(select: exp.Select) -> list[exp.Expression]:
    """The PARTITION BY and ORDER BY expressions of the block's windows (named ones included)."""
    keys: list[exp.Expression] = []
    windows = [w for w in select.find_all(exp.Window) if w.parent_select is select]
    for w in windows + list(select.args.get("windows") or []):
        keys += list(w.args.get("partition_by") or [])
        order = w.args.get("order")
        keys += [o.this for o in (order.expressions if order is not None else [])]
    return keys


def check_group_by_aliases(tree: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    ctes = {c.alias_or_name: c.this for c in tree.find_all(exp.CTE)}
    for select in tree.find_all(exp.Select):
        group = select.args.get("group")
        candidates = list(group.expressions) if group is not None else []
        candidates += _window_keys(select)  # Calcite resolves no SELECT alias inside OVER (…) either
        if not candidates:
            continue
        aliases = {e.alias for e in select.expressions if isinstance(e, exp.Alias)}
        keys = [k for k in candidates if isinstance(k, exp.Column) and not k.table and k.name in aliases]
        if not keys:
            continue
        columns = _source_columns(select, ctx, ctes)
        if columns is None:
            continue
        for k in keys:
            if k.name not in columns:
                raise column_not_found(k.name)
    return tree


def _source_columns(select: exp.Select, ctx: TranslationContext, ctes: dict[str, exp.Expression]) -> set[str] | None:
    """The column names the block's FROM and JOINs provide; None when one of them is not known."""
    sources = []
    source = select.args.get("from_")
    if source is not None:
        sources.append(source.this)
    sources += [j.this for j in select.args.get("joins") or []]
    out: set[str] = set()
    for s in sources:
        if isinstance(s, exp.Table):
            if s.name in ctes:
                named = getattr(ctes[s.name], "named_selects", None)
                if not named or "*" in named:
                    return None
                out.update(named)
            elif s.name in ctx.catalog.datasources and not s.db:
                out.update(c.name for c in ctx.catalog.datasources[s.name])
            else:
                return None
        elif isinstance(s, exp.Subquery):
            named = s.this.named_selects if isinstance(s.this, exp.Query) else None
            if not named or "*" in named:
                return None
            out.update(named)
        else:
            return None
    return out
