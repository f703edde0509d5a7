"""``segmentMetadata``: per-segment (or merged) column analysis.

Each visible segment overlapping the intervals (default: the week before the datasource's last data,
Druid's ``defaultHistory``) is analysed from its loaded table. ``analysisTypes`` default to
cardinality, interval and minmax; ``size`` adds byte estimates, ``aggregators`` the metric
aggregators, ``queryGranularity``/``rollup``/``timestampSpec`` are reported as unknown (null).
With ``merge`` the analyses fold into one result named ``{dataSource}_{start}_{end}_merged`` after the
last segment's interval, as Druid names it (sizes and row counts add up, the larger cardinality wins,
min/max combine).
"""

from __future__ import annotations

from typing import Any

from radstack.druid_types import native_type_of_duckdb
from radstack.storage.segments import merged_segment_id
from radstack.time.intervals import Interval, Period, condense, datetime_to_ms, ms_to_datetime
from serving.broker.native.query_context import QueryContext, parse_intervals, q
from serving.errors import invalid_input

DEFAULT_ANALYSES = ["cardinality", "interval", "minmax"]
_ALL_ANALYSES = {"cardinality", "interval", "minmax", "size", "aggregators", "queryGranularity",
                 "rollup", "timestampSpec"}


def run_segment_metadata(ctx: QueryContext) -> list[dict[str, Any]]:
    if not ctx.exists:
        return []
    query = ctx.query
    analyses = query.get("analysisTypes")
    analyses = DEFAULT_ANALYSES if analyses is None else [str(a) for a in analyses]
    bad = [a for a in analyses if a not in _ALL_ANALYSES]
    if bad:
        raise invalid_input(f"Unknown analysisTypes {bad}")
    if query.get("intervals") is None:
        ends = [c.clip.end for ds in ctx.datasources for c in ds.chunks]
        latest = max(ends)
        start = datetime_to_ms(Period.parse("P1W").add_to(ms_to_datetime(latest), -1))
        ctx.intervals = [Interval(start, latest)]
    else:
        ctx.intervals = parse_intervals(query.get("intervals"))
    include = query.get("toInclude") or {"type": "all"}
    seen: set[str] = set()
    results = []
    for c in sorted(ctx.chunks(), key=lambda c: c.loaded.segment.id.sort_key()):
        if c.segment_id in seen:
            continue
        seen.add(c.segment_id)
        results.append(_analyse(ctx, c.loaded, include, analyses))
    if query.get("merge") and results:
        merged = results[0]
        for r in results[1:]:
            merged = _merge(merged, r)
        # Druid names a merged analysis after the datasource and the interval of the last segment merged
        last = max((c.loaded.segment.id for c in ctx.chunks()), key=lambda i: i.sort_key())
        merged["id"] = merged_segment_id(last.data_source, last.interval)
        if merged["intervals"] is not None:
            ivs = condense([Interval.parse(i) for i in merged["intervals"]])
            merged["intervals"] = [i.iso() for i in ivs]
        return [merged]
    return results


def _included(name: str, include: dict[str, Any]) -> bool:
    typ = include.get("type", "all")
    if typ == "none":
        return False
    if typ == "list":
        return name in (include.get("columns") or [])
    return True


def _column_analysis(col: str, dtype: str, multi: bool) -> list[str]:
    """SQL aggregates of one column after ``count(col)``: for a string column its cardinality,
    min, max and bytes (over the distinct values of each row of a multi-value one, as Druid counts a
    value once per row that holds it, plus whether a row has several)."""
    if multi:
        values = f"flatten(list({col}))"
        return [f"len(list_distinct({values}))", f"list_min({values})", f"list_max({values})",
                f"coalesce(sum(list_sum(list_transform(list_distinct({col}), lambda __v: strlen(__v)))), 0)",
                f"coalesce(max(len({col})), 0) > 1"]
    if dtype == "STRING":
        return [f"count(DISTINCT {col})", f"min({col})", f"max({col})", f"coalesce(sum(strlen({col})), 0)"]
    if dtype.startswith("ARRAY<"):
        return [f"coalesce(sum(len({col})), 0)"]
    return []


def _analyse(ctx: QueryContext, loaded: Any, include: dict[str, Any], analyses: list[str]) -> dict[str, Any]:
    seg = loaded.segment
    duckdb_types = dict(loaded.columns)
    # a multi-value dimension: a list of strings that is not an ARRAY<STRING> column
    cols = [(n, t, t == "STRING" and duckdb_types[n].upper() == "VARCHAR[]")
            for n, t in loaded.druid_types().items() if _included(n, include)]
    exprs = ["count(*)"]
    for name, dtype, multi in cols:
        exprs.append(f"count({q(name)})")
        exprs += _column_analysis(q(name), dtype, multi)
    row = ctx.run(f"SELECT {', '.join(exprs)} FROM {loaded.source}")[0] if cols else (loaded.num_rows,)
    n = int(row[0])
    i = 1
    columns: dict[str, Any] = {}
    total = 0
    for name, dtype, multi in cols:
        non_null = int(row[i])
        i += 1
        card = lo = hi = None
        has_multiple = False
        if dtype == "STRING":
            card, lo, hi, strbytes = int(row[i]), row[i + 1], row[i + 2], int(row[i + 3])
            i += 4
            if non_null < n:  # as in Druid: NULL is one more value in the dictionary, and the smallest
                card, lo = card + 1, None
            size = strbytes  # Druid: each value's UTF-8 length times the rows that hold it
            if multi:
                has_multiple = bool(row[i])
                i += 1
        elif dtype.startswith("ARRAY<"):
            size = 8 * int(row[i]) + 4 * n
            i += 1
        elif name == "__time":
            size = 10 * n  # Druid's estimate of a timestamp's bytes
        elif dtype == "FLOAT":
            size = 4 * n
        elif dtype.startswith("COMPLEX<json"):
            size = 0  # no size estimate for nested JSON in Druid 33
        else:
            size = 8 * n
        if "size" not in analyses:
            size = 0
        total += size + (n if "size" in analyses else 0)  # Druid's segment size adds a byte per row and column
        columns[name] = {
            "typeSignature": dtype,
            # Druid names a complex column's type by its complex type alone ("json", "HLLSketch")
            "type": dtype[len("COMPLEX<"):-1] if dtype.startswith("COMPLEX<") else dtype,
            "hasMultipleValues": has_multiple,
            "hasNulls": non_null < n,
            "size": size,
            # a string column not analysed for cardinality says 0 in Druid 33, other columns null
            "cardinality": card if "cardinality" in analyses else (0 if dtype == "STRING" else None),
            "minValue": lo if "minmax" in analyses else None,
            "maxValue": hi if "minmax" in analyses else None,
            "errorMessage": None,
        }
    columns = dict(sorted(columns.items()))
    aggregators = None
    if "aggregators" in analyses:
        aggregators = {}
        for m in seg.metrics:
            t = dict(loaded.columns).get(m)
            if t is None:
                continue
            prefix = {"LONG": "long", "DOUBLE": "double", "FLOAT": "float"}.get(native_type_of_duckdb(t), "double")
            aggregators[m] = {"type": f"{prefix}Sum", "name": m, "fieldName": m}
    return {
        "id": seg.identifier,
        "intervals": [seg.interval.iso()] if "interval" in analyses else None,
        "columns": columns,
        "size": total,
        "numRows": n,
        "aggregators": aggregators,
        "timestampSpec": None,
        "queryGranularity": None,
        "rollup": None,
    }


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    cols = dict(a["columns"])
    for name, cb in b["columns"].items():
        ca = cols.get(name)
        if ca is None:
            cols[name] = cb
            continue
        if ca["type"] != cb["type"]:
            cols[name] = {**ca, "errorMessage": f"error:cannot_merge_diff_types: [{ca['type']}] and [{cb['type']}]"}
            continue
        card = ca["cardinality"] if cb["cardinality"] is None else (
            cb["cardinality"] if ca["cardinality"] is None else max(ca["cardinality"], cb["cardinality"]))
        lo = min((x for x in (ca["minValue"], cb["minValue"]) if x is not None), default=None)
        hi = max((x for x in (ca["maxValue"], cb["maxValue"]) if x is not None), default=None)
        cols[name] = {**ca, "hasMultipleValues": ca["hasMultipleValues"] or cb["hasMultipleValues"],
                      "hasNulls": ca["hasNulls"] or cb["hasNulls"], "size": ca["size"] + cb["size"],
                      "cardinality": card, "minValue": lo, "maxValue": hi}
    aggs = None
    if a["aggregators"] is not None or b["aggregators"] is not None:
        aggs = {**(a["aggregators"] or {}), **(b["aggregators"] or {})}
    return {
        "id": "merged",
        "intervals": None if a["intervals"] is None else a["intervals"] + (b["intervals"] or []),
        "columns": cols,
        "size": a["size"] + b["size"],
        "numRows": a["numRows"] + b["numRows"],
        "aggregators": aggs,
        "timestampSpec": None,
        "queryGranularity": None,
        "rollup": None,
    }
