"""``groupBy``: aggregates per (bucket, dimensions), with having, limitSpec and subtotals.

Result: ``[{"version":"v1","timestamp","event":{dims…, aggs…, postAggs…}}]``; under granularity
``all`` every timestamp is the start of the first query interval. Rows are ordered by time, then by
the ``limitSpec`` columns (``dimensionOrder`` lexicographic/alphanumeric/numeric/strlen), then by the
dimensions (nulls first); context ``sortByDimsFirst`` puts the columns before time. Each
``subtotalsSpec`` entry is grouped, filtered, sorted and limited on its own; the others' dimensions are
null there.
"""

from __future__ import annotations

from typing import Any

from serving.broker.native.aggregation import BUCKET, AggregationPlan
from serving.broker.native.dimensions import DimensionSpec, parse_dimension
from serving.broker.native.having import having_sql
from serving.broker.native.query_context import QueryContext, q
from serving.broker.native.topn import order_expr
from serving.errors import invalid_input, unsupported


def run_groupby(ctx: QueryContext) -> list[dict[str, Any]]:
    if not ctx.exists:
        return []
    query = ctx.query
    if isinstance(query.get("dataSource"), dict) and query["dataSource"].get("type") == "query":
        raise unsupported("nested groupBy is not supported")
    dims = [parse_dimension(d) for d in query.get("dimensions") or []]
    plan = AggregationPlan.create(ctx, dims)
    row_types = plan.row_types
    having = query.get("having")
    having_where = having_sql(having, row_types, ctx) if having else "TRUE"
    limit_spec = query.get("limitSpec") or {}
    if limit_spec and limit_spec.get("type", "default") not in ("default", "NoopLimitSpec", "noop"):
        raise unsupported(f"limitSpec type [{limit_spec.get('type')}] is not supported")
    limit = limit_spec.get("limit")
    offset = int(limit_spec.get("offset") or 0)
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        raise invalid_input(f"limitSpec.limit must be a non-negative integer, got {limit!r}")
    with_bucket = not ctx.granularity.is_all
    order = _order_keys(limit_spec.get("columns") or [], plan, with_bucket,
                        bool((ctx.context or {}).get("sortByDimsFirst")))
    subtotals = query.get("subtotalsSpec")
    groups: list[list[DimensionSpec]] = [dims]
    if subtotals is not None:
        by_name = {d.output_name: d for d in dims}
        groups = []
        for st in subtotals:
            missing = [n for n in st if n not in by_name]
            if missing:
                raise invalid_input(f"subtotalsSpec names unknown dimension(s) {missing}")
            groups.append([by_name[n] for n in st])
    universal = ctx.intervals[0].start if ctx.intervals else 0
    out: list[dict[str, Any]] = []
    universal_ts = ctx.fmt_time(universal)
    for group in groups:
        inner = plan.post_sql(plan.aggregate_sql(with_bucket=with_bucket, dims=group))
        sql = f"SELECT * FROM ({inner}) WHERE {having_where} ORDER BY {', '.join(order)}"
        if limit is not None:
            sql += f" LIMIT {limit}"
        if offset:
            sql += f" OFFSET {offset}"
        rows = ctx.run(sql)
        names = [x[0] for x in ctx.cursor.description or []]
        for r in rows:
            row = dict(zip(names, r, strict=False))
            ts = ctx.fmt_time(int(row[BUCKET])) if with_bucket else universal_ts
            out.append({"version": "v1", "timestamp": ts, "event": plan.render_values(row)})
    return out


def _order_keys(columns: list[Any], plan: AggregationPlan, with_bucket: bool, dims_first: bool) -> list[str]:
    row_types = plan.row_types
    keys: list[str] = []
    used: set[str] = set()
    for col in columns:
        if isinstance(col, str):
            col = {"dimension": col}
        if not isinstance(col, dict) or "dimension" not in col:
            raise invalid_input(f"Invalid limitSpec column {col!r}")
        name = col["dimension"]
        if name not in row_types:
            raise invalid_input(f"limitSpec orders by unknown column [{name}]")
        direction = str(col.get("direction", "ascending")).lower()
        desc = direction in ("descending", "desc")
        ordering = col.get("dimensionOrder")
        if isinstance(ordering, dict):
            ordering = ordering.get("type")
        typ = row_types[name]
        if ordering is None:
            ordering = "lexicographic" if typ == "STRING" else "numeric"
        exprs = [q(name)] if typ != "STRING" and ordering == "numeric" else order_expr(q(name), ordering, typ)
        nulls = "DESC NULLS LAST" if desc else "ASC NULLS FIRST"
        keys += [f"{e} {nulls}" for e in exprs]
        used.add(name)
    tail = [f"{q(d.output_name)} ASC NULLS FIRST" for d in plan.dims if d.output_name not in used]
    time_key = [f"{BUCKET} ASC"] if with_bucket else []
    out = keys + time_key + tail if dims_first else time_key + keys + tail
    return out or ["1"]
