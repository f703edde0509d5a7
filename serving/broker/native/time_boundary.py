"""``timeBoundary`` and ``dataSourceMetadata``."""

from __future__ import annotations

from typing import Any

from radstack.time.intervals import format_instant
from serving.broker.native.query_context import QueryContext
from serving.errors import invalid_input


def run_time_boundary(ctx: QueryContext) -> list[dict[str, Any]]:
    if not ctx.exists:
        return []
    bound = ctx.query.get("bound")
    if bound not in (None, "minTime", "maxTime"):
        raise invalid_input(f"bound must be minTime or maxTime, got {bound!r}")
    row = ctx.run(f'SELECT epoch_ms(min("__time")), epoch_ms(max("__time")) FROM {ctx.base()} WHERE {ctx.where()}')
    lo, hi = row[0] if row else (None, None)
    if lo is None or hi is None:
        return []
    if bound == "minTime":
        return [{"timestamp": format_instant(lo), "result": {"minTime": format_instant(lo)}}]
    if bound == "maxTime":
        return [{"timestamp": format_instant(hi), "result": {"maxTime": format_instant(hi)}}]
    return [{"timestamp": format_instant(lo),
             "result": {"minTime": format_instant(lo), "maxTime": format_instant(hi)}}]


def run_datasource_metadata(ctx: QueryContext) -> list[dict[str, Any]]:
    best = None
    for c in ctx.chunks():
        di = c.data_interval()
        if di is None:
            continue
        if best is None or di.end > best[1]:
            best = (di.start, di.end)
    if best is None:
        return []
    max_time = format_instant(best[1] - 1)
    # Druid stamps the answer with the time it reports, not the segment's start
    return [{"timestamp": max_time, "result": {"maxIngestedEventTime": max_time}}]
