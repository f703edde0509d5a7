"""Merges of per-row sketches read the integer column beside them.

A datasource ingested without rollup holds one sketch per row, and each such HLL or theta sketch is one
value (an HLL coupon, a theta hash). The broker keeps that value in an integer column beside the sketch
column (:data:`serving.broker.store.segment_cache.SINGLE_PREFIX`; null for every other sketch), reachable only
through the datasource's sketch view (``__sketches__<datasource>``: the datasource's columns, then
those). DuckDB collects a million integers in 5.5–11 ms, a million sketch images in 35–39 ms
(docs/benchmarks.md), so a merge over a datasource's own view becomes::

    DRUID_HLL_MERGE(LIST(t.s) [FILTER (WHERE c)], lgK, type)
    → DRUID_HLL_MERGE_SINGLES(LIST(t.s) FILTER (WHERE t.v IS NULL [AND c]),
                              LIST(t.v) FILTER (WHERE t.v IS NOT NULL [AND c]), lgK, type)

with ``t`` reading the sketch view instead (the theta merge likewise). Where every visible row of the
column has its value there (per-row sketches ingested without rollup), the images are not collected at
all: ``DRUID_HLL_MERGE_SINGLES(CAST(NULL AS BLOB[]), LIST(t.v) [FILTER (WHERE c)], lgK, type)``, so
DuckDB does not even scan the sketch column. Both merges answer the same sketch (``tests/unit/test_hll_merge.py``, ``tests/unit/test_theta_merge.py``). A ``SELECT`` that also
selects ``*`` keeps the datasource's view, so a star never shows the integer columns, and so does a
merge over a subquery, a CTE or a projection (only the datasource's own rows have them).
"""

from __future__ import annotations

from sqlglot import exp

from serving.broker.queries.relations import scopes_of
from serving.broker.sql.timeexpr import call
from serving.broker.sql.translation_context import TranslationContext

#: a merge of sketch images → the same merge with the one-value sketches given as their values
MERGES = {"DRUID_HLL_MERGE": "DRUID_HLL_MERGE_SINGLES", "DRUID_THETA_MERGE": "DRUID_THETA_MERGE_SINGLES"}


def _selects_star(select: exp.Select) -> bool:
    return any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
               for e in select.expressions)


def _merged_column(merge: exp.Anonymous) -> tuple[exp.Column, exp.Expression | None] | None:
    """The sketch column a merge collects (``LIST(col)``, maybe filtered) and its filter's condition."""
    first = merge.expressions[0] if merge.expressions else None
    cond = None
    if isinstance(first, exp.Filter):
        where = first.expression
        cond = where.this if isinstance(where, exp.Where) else None
        if cond is None:
            return None
        first = first.this
    if not (isinstance(first, exp.Anonymous) and first.name.upper() == "LIST" and len(first.expressions) == 1):
        return None
    col = first.expressions[0]
    return (col, cond) if isinstance(col, exp.Column) and col.table and isinstance(col.this, exp.Identifier) else None


def _collected(value: exp.Expression, cond: exp.Expression) -> exp.Expression:
    return exp.Filter(this=call("LIST", value), expression=exp.Where(this=cond))


def sketch_singles(tree: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    views = ctx.catalog.sketch_views
    if not views:
        return tree
    swapped: dict[int, str] = {}  # tables already reading the sketch view → their datasource
    for scope in scopes_of(tree):
        select = scope.expression
        if not isinstance(select, exp.Select) or _selects_star(select):
            continue
        for merge in list(select.find_all(exp.Anonymous)):
            name = merge.name.upper()
            if name not in MERGES or merge.find_ancestor(exp.Select) is not select:
                continue
            found = _merged_column(merge)
            if found is None:
                continue
            col, cond = found
            table = scope.sources.get(col.table)
            if not isinstance(table, exp.Table) or table.args.get("db") or table.args.get("catalog"):
                continue
            ds = swapped.get(id(table), table.name)
            view = views.get(ds) if ds in ctx.datasources else None
            if view is None or col.name not in view[1]:
                continue
            value = exp.column(view[1][col.name], table=col.table, quoted=True)
            if col.name in view[2]:  # every row has its value: no image to collect (nor to scan)
                images: exp.Expression = exp.cast(exp.Null(), exp.DataType.build("BLOB[]", dialect="duckdb"))
                values = call("LIST", value) if cond is None else _collected(value, cond.copy())
            else:
                absent = exp.Is(this=value.copy(), expression=exp.Null())
                present = exp.Not(this=absent.copy())
                if cond is not None:
                    absent, present = exp.and_(absent, cond.copy()), exp.and_(present, cond.copy())
                images, values = _collected(col.copy(), absent), _collected(value, present)
            merge.replace(call(MERGES[name], images, values, *(a.copy() for a in merge.expressions[1:])))
            ctx.udfs.add(MERGES[name])
            if id(table) not in swapped:  # the sketch view, under the alias the columns name
                swapped[id(table)] = ds
                alias = table.alias_or_name
                table.set("this", exp.to_identifier(view[0], quoted=True))
                table.set("alias", exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))
    return tree


# ---- what this rule declares (serving/broker/sql/rule_registry.py) ----
EMITS = frozenset({"LIST", *MERGES.values()})
