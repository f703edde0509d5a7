"""``search``: dimension values matching a search query spec, with row counts, per bucket.

Result: ``[{"timestamp","result":[{"dimension","value","count"}]}]``, sorted by ``sort``
(lexicographic by default: value, then dimension), at most ``limit`` (1000) per bucket.
"""

from __future__ import annotations

from typing import Any

from serving.broker.native.dimensions import parse_dimension, search_match_sql
from serving.broker.native.query_context import QueryContext, sql_str
from serving.broker.native.topn import order_expr
from serving.errors import invalid_input


def run_search(ctx: QueryContext) -> list[dict[str, Any]]:
    if not ctx.exists:
        return []
    query = ctx.query
    spec = query.get("query")
    if isinstance(spec, str):
        spec = {"type": "insensitive_contains", "value": spec}
    if not isinstance(spec, dict):
        raise invalid_input("search needs a 'query' spec")
    limit = int(query.get("limit", 1000))
    sort = query.get("sort") or {"type": "lexicographic"}
    ordering = sort.get("type") if isinstance(sort, dict) else str(sort)
    ctx.base()
    dims_raw = query.get("searchDimensions")
    if dims_raw is None:
        dims_raw = [c for c, t in ctx.column_types.items()
                    if c != "__time" and t == "STRING" and any(
                        (col := ds.column(c)) is not None and col.kind == "dimension" for ds in ctx.datasources)]
    dims = [parse_dimension(d) for d in dims_raw]
    bucket = ctx.bucket()
    bsel = f"{bucket} AS __b, " if bucket else ""
    parts = []
    for d in dims:
        value = d.sql(ctx)
        if d.output_type != "STRING":
            value = f"CAST({value} AS VARCHAR)"
        match = f"coalesce({search_match_sql(spec, value)}, FALSE)"
        if d.dimension in ctx.multi_value:  # searched value by value, each counted once per row, as in Druid
            source, cond = ctx.exploded([d.dimension], ctx.where(), distinct=True), match
        else:
            source, cond = ctx.base(), f"({ctx.where()}) AND {match}"
        parts.append(
            f"SELECT {bsel}{sql_str(d.output_name)} AS dimension, {value} AS value, count(*) AS count "
            f"FROM {source} WHERE {cond} GROUP BY ALL"
        )
    if not parts:
        return []
    keys = [*order_expr("value", ordering), "dimension"]
    order = ", ".join(f"{k} ASC NULLS FIRST" for k in keys)
    part = "PARTITION BY __b " if bucket else ""
    sql = (f"SELECT * FROM ({' UNION ALL '.join(parts)}) "
           f"QUALIFY row_number() OVER ({part}ORDER BY {order}) <= {limit} "
           f"ORDER BY {'__b, ' if bucket else ''}{order}")
    rows = ctx.run(sql)
    if bucket is None:
        ts = ctx.first_segment_start()
        if ts is None:
            return []
        return [{"timestamp": ctx.fmt_time(ts),
                 "result": [{"dimension": r[0], "value": r[1], "count": int(r[2])} for r in rows]}]
    out: list[dict[str, Any]] = []
    cur = None
    for b, dim, value, count in rows:
        if b != cur:
            out.append({"timestamp": ctx.fmt_time(int(b)), "result": []})
            cur = b
        out[-1]["result"].append({"dimension": dim, "value": value, "count": int(count)})
    return out
