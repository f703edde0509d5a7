"""The aggregate → post-aggregate pipeline that timeseries, topN and groupBy share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from serving.broker.native.aggregators import Aggregator, merged_sketch_columns, parse_aggregator
from serving.broker.native.dimensions import DimensionSpec, kept_values_lambda
from serving.broker.native.postaggregators import PostAggregator, parse_post_aggregators
from serving.broker.native.query_context import QueryContext, q
from serving.broker.native.results import render
from serving.errors import invalid_input

BUCKET = "__bucket"
_STAMP = "__bucket_ts"  # the TIMESTAMP bucket a query groups by before BUCKET is taken from it


@dataclass
class AggregationPlan:
    ctx: QueryContext
    dims: list[DimensionSpec] = field(default_factory=list)
    aggs: list[Aggregator] = field(default_factory=list)
    posts: list[PostAggregator] = field(default_factory=list)

    @classmethod
    def create(cls, ctx: QueryContext, dims: list[DimensionSpec]) -> AggregationPlan:
        ctx.read_singles(merged_sketch_columns(ctx.query.get("aggregations")))
        ctx.base()
        aggs = [parse_aggregator(a, ctx) for a in ctx.query.get("aggregations") or []]
        names = [d.output_name for d in dims] + [a.name for a in aggs]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise invalid_input(f"Duplicate output name(s) {sorted(dup)}")
        known = {d.output_name: d.output_type for d in dims} | {a.name: a.type for a in aggs}
        posts = parse_post_aggregators(ctx.query.get("postAggregations") or [], known, ctx)
        return cls(ctx, dims, aggs, posts)

    @property
    def row_types(self) -> dict[str, str]:
        out = {d.output_name: d.output_type for d in self.dims}
        out.update({a.name: a.type for a in self.aggs})
        out.update({p.name: ("DOUBLE" if p.type == "INFER" else p.type) for p in self.posts})
        return out

    def output_columns(self) -> list[tuple[str, str]]:
        """(name, type) of the output row in Druid's order: dimensions, aggregators, post-aggregators."""
        return ([(d.output_name, d.output_type) for d in self.dims] + [(a.name, a.type) for a in self.aggs]
                + [(p.name, p.type) for p in self.posts])

    def aggregate_sql(self, *, with_bucket: bool, dims: list[DimensionSpec] | None = None,
                      extra_where: str = "TRUE", null_dims: bool = True, count_rows: bool = False) -> str:
        """``SELECT [bucket,] dims, aggs FROM base WHERE … GROUP BY ALL``; dimensions left out of
        ``dims`` come back as NULL (subtotals)."""
        ctx = self.ctx
        chosen = self.dims if dims is None else dims
        items: list[str] = []
        # grouped by the TIMESTAMP bucket where DuckDB truncates to it, its epoch millis taken after
        stamp = ctx.bucket_timestamp() if with_bucket else None
        bucket = None if not with_bucket else stamp if stamp is not None else ctx.bucket()
        if bucket is not None:
            items.append(f"{bucket} AS {_STAMP if stamp is not None else BUCKET}")
        for d in self.dims:
            if d in chosen:
                items.append(f"{d.sql(ctx)} AS {q(d.output_name)}")
            elif null_dims:
                sql_type = {"STRING": "VARCHAR", "LONG": "BIGINT", "FLOAT": "FLOAT", "DOUBLE": "DOUBLE"}[d.output_type]
                items.append(f"CAST(NULL AS {sql_type}) AS {q(d.output_name)}")
        items += [f"{a.sql} AS {q(a.name)}" for a in self.aggs]
        if not self.aggs or count_rows:
            items.append("count(*) AS __n")
        grouped = bucket is not None or any(d in chosen for d in self.dims)
        where = ctx.where()
        if extra_where != "TRUE":
            where = f"({where}) AND ({extra_where})"
        multi = sorted({d.dimension for d in chosen if d.dimension in ctx.multi_value})
        if multi:  # filter the rows, then one row per value of each grouped multi-value dimension
            keep = {d.dimension: lam for d in chosen if d.dimension in ctx.multi_value
                    if (lam := kept_values_lambda(d)) is not None}
            sql = f"SELECT {', '.join(items)} FROM {ctx.exploded(multi, where, keep)}"
        else:
            sql = f"SELECT {', '.join(items)} FROM {ctx.base()} WHERE {where}"
        if grouped:
            sql += " GROUP BY ALL"
        if stamp is not None:
            sql = f"SELECT epoch_ms({_STAMP}) AS {BUCKET}, * EXCLUDE ({_STAMP}) FROM ({sql})"
        return sql

    def post_sql(self, inner: str) -> str:
        if not self.posts:
            return inner
        posts = ", ".join(f"{p.sql} AS {q(p.name)}" for p in self.posts)
        return f"SELECT *, {posts} FROM ({inner})"

    def render_values(self, row: dict[str, Any], skip: set[str] | None = None) -> dict[str, Any]:
        out = {}
        for name, typ in self.output_columns():
            if skip and name in skip:
                continue
            out[name] = render(row.get(name), typ)
        return out
