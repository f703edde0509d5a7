"""``topN``: the top ``threshold`` values of one dimension per bucket, ranked by a metric.

``metric`` may be a name (numeric, descending), ``{"type":"numeric","metric"}``,
``{"type":"inverted","metric":…}`` (ascending), or ``{"type":"dimension","ordering","previousStop"}``
(dimension values in order, after ``previousStop``). Exact, unlike Druid's per-segment approximation.
Result: ``[{"timestamp","result":[{dim, agg…, postAgg…}, …]}]``; buckets without rows are left out.
"""

from __future__ import annotations

from typing import Any

from serving.broker.native.aggregation import BUCKET, AggregationPlan
from serving.broker.native.dimensions import parse_dimension
from serving.broker.native.query_context import QueryContext, q, sql_str
from serving.errors import invalid_input


def order_expr(col: str, ordering: str | None, col_type: str = "STRING") -> list[str]:
    """SQL sort keys for a Druid StringComparator (lexicographic/alphanumeric/numeric/strlen/version)."""
    o = (ordering or "lexicographic").lower()
    if o == "numeric":
        return [f"TRY_CAST({col} AS DOUBLE)"]
    if o == "strlen":
        return [f"length(CAST({col} AS VARCHAR))", f"CAST({col} AS VARCHAR)"]
    if o in ("alphanumeric", "natural", "version"):
        # natural order: digit runs compare as numbers
        return [f"list_transform(regexp_extract_all(CAST({col} AS VARCHAR), '(\\d+|\\D+)'), "
                f"x -> CASE WHEN regexp_matches(x, '^\\d+$') THEN lpad(x, 30, '0') ELSE x END)"]
    if col_type == "STRING":
        return [col]
    return [col]


def _filtered_without_null(spec: Any) -> bool:
    """A dimension spec that keeps only the values it names or matches (a listFiltered allow-list without
    NULL, a regexFiltered, a prefixFiltered): its topN has no NULL group, as in Druid 33. (A deny-list keeps
    the NULL group, as a plain topN does.)"""
    if not isinstance(spec, dict) or spec.get("type") not in ("listFiltered", "regexFiltered", "prefixFiltered"):
        return False
    if spec.get("type") == "listFiltered":
        return bool(spec.get("isWhitelist", True)) and None not in (spec.get("values") or [])
    return True


def run_topn(ctx: QueryContext) -> list[dict[str, Any]]:
    if not ctx.exists:
        return []
    q_ = ctx.query
    if q_.get("dimension") is None:
        raise invalid_input("topN needs 'dimension'")
    threshold = q_.get("threshold")
    if not isinstance(threshold, int) or threshold < 0:
        raise invalid_input(f"topN 'threshold' must be a non-negative integer, got {threshold!r}")
    dim = parse_dimension(q_["dimension"])
    plan = AggregationPlan.create(ctx, [dim])
    metric = q_.get("metric")
    if metric is None:
        raise invalid_input("topN needs 'metric'")
    inverted = False
    while isinstance(metric, dict) and metric.get("type") == "inverted":
        inverted = not inverted
        metric = metric.get("metric")
    d = q(dim.output_name)
    extra = "TRUE"
    if isinstance(metric, str) or (isinstance(metric, dict) and metric.get("type") == "numeric"):
        name = metric if isinstance(metric, str) else metric.get("metric")
        if name not in plan.row_types or name == dim.output_name:
            raise invalid_input(f"topN metric [{name}] is not an aggregator or post-aggregator")
        direction = "ASC NULLS FIRST" if inverted else "DESC NULLS LAST"
        keys = [f"{q(name)} {direction}", f"{d} ASC NULLS FIRST"]
    elif isinstance(metric, dict) and metric.get("type") in ("dimension", "lexicographic", "alphaNumeric"):
        ordering = metric.get("ordering") or ("alphanumeric" if metric.get("type") == "alphaNumeric" else None)
        if isinstance(ordering, dict):
            ordering = ordering.get("type")
        direction = "DESC NULLS LAST" if inverted else "ASC NULLS FIRST"
        keys = [f"{k} {direction}" for k in order_expr(d, ordering, dim.output_type)]
        stop = metric.get("previousStop")
        if stop is not None:
            cmp = "<" if inverted else ">"
            if (ordering or "lexicographic").lower() == "numeric":
                extra = f"TRY_CAST({d} AS DOUBLE) {cmp} {float(stop)!r}"
            else:
                extra = f"CAST({d} AS VARCHAR) {cmp} {sql_str(stop)}"
    else:
        raise invalid_input(f"Unsupported topN metric spec {metric!r}")
    if _filtered_without_null(q_["dimension"]):
        # a filtered dimension spec's topN ranks the values it lets through: no NULL group (Druid 33)
        extra = f"({extra}) AND {d} IS NOT NULL"
    with_bucket = not ctx.granularity.is_all
    inner = plan.post_sql(plan.aggregate_sql(with_bucket=with_bucket))
    part = f"PARTITION BY {BUCKET} " if with_bucket else ""
    order = ", ".join(keys)
    if with_bucket:
        sql = (f"SELECT * FROM ({inner}) WHERE {extra} "
               f"QUALIFY row_number() OVER ({part}ORDER BY {order}) <= {threshold} "
               f"ORDER BY {BUCKET}, {order}")
    else:  # one bucket: a top-N heap (ORDER BY … LIMIT) beats ranking every group
        sql = f"SELECT * FROM ({inner}) WHERE {extra} ORDER BY {order} LIMIT {threshold}"
    rows = ctx.run(sql)
    names = [x[0] for x in ctx.cursor.description or []]
    if not with_bucket:
        ts = ctx.all_timestamp()
        if ts is None:
            return []
        return [{"timestamp": ctx.fmt_time(ts),
                 "result": [plan.render_values(dict(zip(names, r, strict=False))) for r in rows]}]
    out: list[dict[str, Any]] = []
    cur_ts: int | None = None
    for r in rows:
        row = dict(zip(names, r, strict=False))
        ts = int(row[BUCKET])
        if ts != cur_ts:
            out.append({"timestamp": ctx.fmt_time(ts), "result": []})
            cur_ts = ts
        out[-1]["result"].append(plan.render_values(row))
    return out
