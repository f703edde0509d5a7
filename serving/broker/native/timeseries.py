"""``timeseries``: one row of aggregates per granularity bucket.

Result: ``[{"timestamp": "…", "result": {agg…, postAgg…}}]``. Buckets with no rows between the first
and last data of each segment are filled (count 0, others null) unless ``skipEmptyBuckets``;
``descending`` reverses, ``limit`` truncates, context ``grandTotal`` appends a row whose timestamp is
null.
"""

from __future__ import annotations

from typing import Any

from serving.broker.native.aggregation import BUCKET, AggregationPlan
from serving.broker.native.query_context import QueryContext, q
from serving.broker.queries.query_manager import native_flag
from serving.errors import invalid_input


def run_timeseries(ctx: QueryContext) -> list[dict[str, Any]]:
    if not ctx.exists:
        return []
    plan = AggregationPlan.create(ctx, [])
    skip_empty = native_flag(ctx.context.get("skipEmptyBuckets"))
    descending = native_flag(ctx.query.get("descending"))
    limit = ctx.query.get("limit")
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        raise invalid_input(f"limit must be a non-negative integer, got {limit!r}")
    rows: list[tuple[int, dict[str, Any]]] = []
    if ctx.granularity.is_all:
        ts = ctx.all_timestamp()
        if ts is None:
            return []
        inner = plan.aggregate_sql(with_bucket=False, count_rows=True)
        res = _fetch(ctx, plan.post_sql(inner))
        for r in res:
            if skip_empty and not r["__n"]:
                continue
            rows.append((ts, r))
    else:
        agg = plan.aggregate_sql(with_bucket=True)
        fill = None if skip_empty else ctx.fill()
        if fill:
            empties = ", ".join(
                f"coalesce(a.{q(x.name)}, {x.empty!r}) AS {q(x.name)}" if x.empty is not None
                else f"a.{q(x.name)}" for x in plan.aggs
            ) or "NULL AS __n"
            joined = (f"SELECT coalesce(b.{BUCKET}, a.{BUCKET}) AS {BUCKET}, {empties} "
                      f"FROM (SELECT unnest($1::BIGINT[]) AS {BUCKET}) b FULL JOIN ({agg}) a USING ({BUCKET})")
            sql = plan.post_sql(joined)
            res = _fetch(ctx, f"SELECT * FROM ({sql}) ORDER BY {BUCKET}", [fill])
        else:
            res = _fetch(ctx, f"SELECT * FROM ({plan.post_sql(agg)}) ORDER BY {BUCKET}")
        rows = [(int(r[BUCKET]), r) for r in res]
    if descending:
        rows.reverse()
    if limit is not None:
        rows = rows[:limit]
    out: list[dict[str, Any]] = [
        {"timestamp": ctx.fmt_time(ts), "result": plan.render_values(r)} for ts, r in rows
    ]
    if native_flag(ctx.context.get("grandTotal")):
        total = _fetch(ctx, plan.post_sql(plan.aggregate_sql(with_bucket=False)))
        out.append({"timestamp": None, "result": plan.render_values(total[0] if total else {})})
    return out


def _fetch(ctx: QueryContext, sql: str, params: Any = None) -> list[dict[str, Any]]:
    ctx.rq.check()
    rows = ctx.run(sql, params)
    names = [d[0] for d in ctx.cursor.description or []]
    return [dict(zip(names, r, strict=False)) for r in rows]
