"""Answer a query block from an aggregate projection when the projection holds everything it reads.

Runs after table resolution and output naming, on the Druid-level tree. A ``SELECT`` block whose
``FROM`` is one datasource (no join) and that aggregates (GROUP BY or aggregate functions) is *covered*
by a projection of that datasource when every column it reads is

- a grouping dimension of the projection — anywhere, except under an aggregate that counts duplicates
  (only ``MIN``/``MAX``/``COUNT(DISTINCT …)``/``APPROX_COUNT_DISTINCT*``/``BIT_AND``/``BIT_OR`` are
  insensitive to how many rows carry a value);
- a metric the projection keeps, read directly by the aggregate it was re-aggregated with
  (``SUM(m)`` for sums, ``MIN(m)``/``MAX(m)`` for min/max);
- ``__time`` under ``TIME_FLOOR``/``FLOOR … TO``/``DATE_TRUNC`` to a granularity whose buckets are
  unions of the projection's, or compared (``>=``, ``<``) with a literal on a projection bucket boundary;

and ``COUNT(*)`` — which becomes the sum of the projection's ``__rows``. Then the block reads the
projection's view instead of the datasource; the answer is the same because flooring to the
projection's buckets and re-aggregating commutes with everything above. Among covering projections the
one with the fewest rows wins. Context: ``noProjections`` turns this off, ``useProjection`` names the
projection that must answer (400 when it cannot), ``forceProjections`` makes any uncovered aggregate
block over a datasource with projections a 400.
"""

from __future__ import annotations

from sqlglot import exp

from radstack.projections import ROWS_COLUMN, granularity_covers, is_aligned_instant
from radstack.time.granularity import Granularity, GranularityError
from radstack.time.intervals import TimeParseError, parse_instant
from radstack.time.sql import is_utc_zone
from serving.broker.sql.errors import validation_error
from serving.broker.sql.rules import aggregates, anonymous_name, block_nodes, is_aggregate
from serving.broker.sql.translation_context import TranslationContext, truthy
from serving.broker.store.projection_views import ProjectionView

#: Aggregates whose answer depends only on the set of values they see.
_SET_AGGREGATES = frozenset({"APPROX_COUNT_DISTINCT_DS_HLL", "APPROX_COUNT_DISTINCT_DS_THETA", "BIT_AND", "BIT_OR"})
_KINDS: dict[type[exp.Expression], str] = {exp.Sum: "sum", exp.Min: "min", exp.Max: "max"}
_UNITS = {"SECOND": "PT1S", "MINUTE": "PT1M", "HOUR": "PT1H", "DAY": "P1D", "WEEK": "P1W", "MONTH": "P1M",
          "QUARTER": "P3M", "YEAR": "P1Y"}


def use_projections(tree: exp.Expression, ctx: TranslationContext) -> exp.Expression:
    """Point every covered block at its projection's view (see the module docstring)."""
    qc = ctx.query_context
    if truthy(qc.get("noProjections", False)) or not ctx.catalog.projections:
        return tree
    wanted = qc.get("useProjection")
    force = truthy(qc.get("forceProjections", False)) or wanted is not None
    for select in list(tree.find_all(exp.Select)):
        table = _only_table(select, ctx)
        if table is None or not aggregates(select):  # a scan reads base rows
            continue
        views = ctx.catalog.projections.get(table.name, ())
        if wanted is not None:
            views = tuple(v for v in views if v.name == wanted)
        if not views and wanted is None:
            continue
        covering = [v for v in views if _covers(select, table, v, ctx)]
        if not covering:
            if force:
                raise validation_error(
                    f"Projection[{wanted}] specified, but does not satisfy query" if wanted is not None
                    else f"Force projections specified, but none satisfy query on datasource[{table.name}]"
                )
            continue
        best = min(covering, key=lambda v: v.cost)
        ctx.projections[table.name] = best.name
        _rewrite(select, table, best)
    return tree


def _only_table(select: exp.Select, ctx: TranslationContext) -> exp.Table | None:
    """The datasource a block reads, when it reads exactly one and joins nothing."""
    src = select.args.get("from_") or select.args.get("from")
    if src is None or select.args.get("joins") or select.args.get("laterals"):
        return None
    table = src.this
    if not isinstance(table, exp.Table) or table.args.get("db") or table.name in ctx.cte_names:
        return None
    return table if ctx.catalog.has(table.name) else None


def _enclosing_aggregate(node: exp.Expression, root: exp.Select) -> exp.Expression | None:
    p = node.parent
    while p is not None and p is not root:
        if is_aggregate(p):
            return p
        p = p.parent
    return None


def _covers(select: exp.Select, table: exp.Table, view: ProjectionView, ctx: TranslationContext) -> bool:
    """Whether ``view`` holds everything the aggregating block ``select`` reads (module docstring)."""
    names = {table.alias_or_name, table.name}
    aliases = {e.alias for e in select.expressions if e.alias}
    dims, metrics = set(view.spec.dimensions), view.spec.metrics
    for node in block_nodes(select, select):
        if isinstance(node, exp.Window):
            return False
        if isinstance(node, exp.Count) and not isinstance(node.this, exp.Star) and not isinstance(node.this, exp.Distinct):
            return False  # COUNT(x) counts base rows with a value
        if is_aggregate(node) and not isinstance(node, exp.Count | exp.Min | exp.Max | exp.Sum | exp.ApproxDistinct) \
                and anonymous_name(node) not in _SET_AGGREGATES:
            return False
        if not isinstance(node, exp.Column):
            continue
        if node.table and node.table not in names:
            return False  # a correlated reference to an outer block
        name = node.name
        if name in aliases and node.find_ancestor(exp.Order) is not None:
            continue  # ORDER BY an output column
        if name == "__time":
            if not _time_ok(node, view, ctx):
                return False
            continue
        agg = _enclosing_aggregate(node, select)
        if name in dims:
            if agg is None or isinstance(agg, exp.Min | exp.Max | exp.ApproxDistinct) \
                    or anonymous_name(agg) in _SET_AGGREGATES:
                continue
            if isinstance(agg, exp.Count) and isinstance(agg.this, exp.Distinct):
                continue
            return False
        if name in metrics and agg is not None and node.parent is agg and _KINDS.get(type(agg)) == metrics[name]:
            continue
        return False
    return True


def _time_ok(col: exp.Column, view: ProjectionView, ctx: TranslationContext) -> bool:
    """``__time`` floored to a covering granularity, or compared with a bucket boundary."""
    parent = col.parent
    gran = view.spec.granularity
    if not is_utc_zone(ctx.time_zone):
        return False
    if anonymous_name(parent) == "TIME_FLOOR" and parent.expressions[0] is col:
        args = parent.expressions
        period = args[1] if len(args) > 1 else None
        extra_ok = all(isinstance(a, exp.Null) or (isinstance(a, exp.Literal) and is_utc_zone(str(a.this)))
                       for a in args[3:4]) and (len(args) < 3 or isinstance(args[2], exp.Null))
        return extra_ok and isinstance(period, exp.Literal) and period.is_string and _covered(str(period.this), gran)
    if isinstance(parent, exp.Floor) and parent.args.get("to") is not None:
        return _covered(_UNITS.get(str(parent.args["to"].name).upper(), ""), gran)
    if isinstance(parent, exp.DateTrunc | exp.TimestampTrunc) and parent.args.get("unit") is not None:
        unit = parent.args["unit"]
        return _covered(_UNITS.get(str(unit.name).upper(), ""), gran)
    if isinstance(parent, exp.GTE | exp.LT | exp.LTE | exp.GT):
        other = parent.expression if parent.this is col else parent.this
        lower = isinstance(parent, exp.GTE) if parent.this is col else isinstance(parent, exp.LTE)
        upper = isinstance(parent, exp.LT) if parent.this is col else isinstance(parent, exp.GT)
        ms = _literal_millis(other)
        return (lower or upper) and ms is not None and is_aligned_instant(ms, gran)
    return False


def _covered(period: str, gran: Granularity) -> bool:
    if not period:
        return False
    try:
        return granularity_covers(Granularity.parse({"type": "period", "period": period}), gran)
    except GranularityError:
        return False


def _literal_millis(node: exp.Expression) -> int | None:
    if isinstance(node, exp.Cast) and node.to.is_type("timestamp", "date"):
        node = node.this
    if not isinstance(node, exp.Literal) or not node.is_string:
        return None
    try:
        return parse_instant(str(node.this).strip().replace(" ", "T"))
    except (TimeParseError, ValueError):
        return None


def _rewrite(select: exp.Select, table: exp.Table, view: ProjectionView) -> None:
    if not table.alias:
        table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name, quoted=True)))
    table.set("this", exp.to_identifier(view.view_name, quoted=True))
    for node in list(block_nodes(select, select)):
        if isinstance(node, exp.Count) and isinstance(node.this, exp.Star):
            total: exp.Expression = exp.Sum(this=exp.column(ROWS_COLUMN, quoted=True))
            target: exp.Expression = node
            if isinstance(node.parent, exp.Filter):  # COUNT(*) FILTER (WHERE …): the filter stays on the sum
                target = node.parent
                total = exp.Filter(this=total, expression=target.expression.copy())
            rows = exp.cast(total, exp.DataType.build("BIGINT"))
            target.replace(exp.Coalesce(this=rows, expressions=[exp.Literal.number(0)]))
