"""Choose the aggregate projection a native ``timeseries``/``topN``/``groupBy`` query reads, if any.

A projection covers the query when the query reads one datasource, has no virtual columns, its
granularity's buckets are unions of the projection's, every interval bound is a projection bucket
boundary, its filter and dimensions read only grouping dimensions (no expression filters), and every
aggregator is ``count`` (answered from ``__rows``) or a ``long``/``double``/``float`` ``Sum``/``Min``/
``Max`` over a metric the projection re-aggregated the same way (``filtered`` aggregators when their
filter is covered too). Post-aggregators, having and limit specs read the outputs, so they never
matter. Context keys as in SQL: ``noProjections``, ``useProjection``, ``forceProjections``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from radstack.projections import granularity_covers, is_aligned_instant
from radstack.time.granularity import Granularity
from radstack.time.intervals import ETERNITY_END, ETERNITY_START, Interval
from serving.broker.queries.query_manager import native_flag
from serving.broker.store.projection_views import ProjectionView
from serving.errors import invalid_input

_AGG_RE = re.compile(r"^(long|double|float)(Sum|Min|Max)$")
_QUERY_TYPES = ("timeseries", "topN", "groupBy")


def choose_projection(query: dict[str, Any], views: Sequence[ProjectionView], granularity: Granularity,
                      intervals: Sequence[Interval]) -> ProjectionView | None:
    """The cheapest covering projection, or None; 400 when the context demands one that cannot answer."""
    ctx = query.get("context") or {}
    if native_flag(ctx.get("noProjections")) or query.get("queryType") not in _QUERY_TYPES:
        return None
    wanted = ctx.get("useProjection")
    candidates = [v for v in views if wanted is None or v.name == wanted]
    covering = [v for v in candidates if _covers(query, v, granularity, intervals)]
    if covering:
        return min(covering, key=lambda v: v.cost)
    if wanted is not None:
        raise invalid_input(f"Projection[{wanted}] specified, but does not satisfy query")
    if native_flag(ctx.get("forceProjections")) and views:
        raise invalid_input("Force projections specified, but none satisfy query")
    return None


def _covers(query: dict[str, Any], view: ProjectionView, gran: Granularity, intervals: Sequence[Interval]) -> bool:
    pg = view.spec.granularity
    if query.get("virtualColumns") or not granularity_covers(gran, pg):
        return False
    for iv in intervals:
        for b in (iv.start, iv.end):
            if b not in (ETERNITY_START, ETERNITY_END) and not is_aligned_instant(b, pg):
                return False
    dims = set(view.spec.dimensions)
    if not _reads_only(query.get("filter"), dims):
        return False
    shown = query.get("dimensions") if query.get("queryType") == "groupBy" else [query.get("dimension")]
    if not all(_reads_only(d, dims) for d in shown or []):
        return False
    return all(_aggregator_ok(a, view, dims) for a in query.get("aggregations") or [])


def _reads_only(node: Any, dims: set[str]) -> bool:
    """True when a filter or dimension spec reads nothing but ``dims`` (and no expression)."""
    if node is None:
        return True
    if isinstance(node, str):
        return node in dims
    if isinstance(node, list):
        return all(_reads_only(n, dims) for n in node)
    if not isinstance(node, dict):
        return True
    if "expression" in node or node.get("type") in ("javascript", "expression", "interval"):
        return False
    for key, value in node.items():
        if key in ("dimension", "column") and not (isinstance(value, str) and value in dims):
            return False
        if key == "dimensions" and not (isinstance(value, list) and all(_reads_only(v, dims) for v in value)):
            return False
        if key in ("fields", "field", "filter", "extractionFn", "delegate", "filters") and not _reads_only_nested(value, dims):
            return False
    return True


def _reads_only_nested(value: Any, dims: set[str]) -> bool:
    if isinstance(value, list):
        return all(_reads_only(v, dims) if isinstance(v, dict) else True for v in value)
    return _reads_only(value, dims) if isinstance(value, dict) else True


def _aggregator_ok(spec: Any, view: ProjectionView, dims: set[str]) -> bool:
    if not isinstance(spec, dict):
        return False
    typ = spec.get("type")
    if typ == "count":
        return True
    if typ == "filtered":
        return _reads_only(spec.get("filter"), dims) and _aggregator_ok(spec.get("aggregator"), view, dims)
    m = _AGG_RE.match(str(typ))
    field = spec.get("fieldName")
    if m is None or spec.get("expression") is not None or not isinstance(field, str):
        return False
    return view.spec.metrics.get(field) == m.group(2).lower() and view.metric_type(field) == m.group(1)
