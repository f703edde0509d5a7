"""DimensionSpecs (``default``, ``extraction``) and extraction functions → SQL.

A dimension spec becomes one SQL expression producing the output value. Druid's default output type
is STRING, so a LONG column grouped without ``outputType`` comes back as strings ("123"), and
``__time`` as its epoch millis in a string. Supported extraction functions: ``substring``, ``strlen``,
``upper``, ``lower``, ``regex``, ``partial``, ``searchQuery``, ``lookup`` (inline map), ``registeredLookup``
(a lookup of the coordinator's configuration, docs/lookups.md), ``timeFormat``,
``time``, ``stringFormat``, ``bucket``, ``cascade``; others answer 501.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from radstack.time.granularity import Granularity, GranularityError
from radstack.time.joda import joda_to_strftime
from serving.broker.native.granularity_sql import bucket_sql
from serving.errors import invalid_input, unsupported
from serving.lookups import value_sql

if TYPE_CHECKING:
    from serving.broker.native.query_context import QueryContext

SQL_TYPES = {"STRING": "VARCHAR", "LONG": "BIGINT", "FLOAT": "FLOAT", "DOUBLE": "DOUBLE",
             # grouping an ARRAY column by whole arrays, as Druid does with an ARRAY outputType
             "ARRAY<STRING>": "VARCHAR[]", "ARRAY<LONG>": "BIGINT[]", "ARRAY<DOUBLE>": "DOUBLE[]"}


def _s(v: Any) -> str:
    return "'" + str(v).replace("'", "''") + "'"


@dataclass(frozen=True)
class DimensionSpec:
    dimension: str
    output_name: str
    output_type: str  # STRING | LONG | FLOAT | DOUBLE | ARRAY<STRING|LONG|DOUBLE>
    extraction: dict[str, Any] | None = None

    def sql(self, ctx: QueryContext) -> str:
        src_type = ctx.col_type(self.dimension)
        if self.extraction is not None:
            value = extraction_sql(self.extraction, ctx.col(self.dimension), src_type, ctx)
            src_type = "STRING"
        else:
            value = ctx.col(self.dimension)
        if self.output_type == src_type:
            return value
        if self.output_type == "STRING":
            return f"CAST({value} AS VARCHAR)"
        return f"TRY_CAST({value} AS {SQL_TYPES[self.output_type]})"


def parse_dimension(spec: Any) -> DimensionSpec:
    if isinstance(spec, str):
        return DimensionSpec(spec, spec, "STRING")
    if not isinstance(spec, dict):
        raise invalid_input(f"Invalid dimension spec {spec!r}")
    typ = spec.get("type", "default")
    if typ in ("listFiltered", "regexFiltered", "prefixFiltered") and isinstance(spec.get("delegate"), (dict, str)):
        # Druid's shape: the filter wraps a delegate dimension spec; its values are kept or dropped
        inner = parse_dimension(spec["delegate"])
        own = {"type": "__" + typ, **{k: v for k, v in spec.items() if k not in ("type", "delegate")}}
        fn = own if inner.extraction is None else {"type": "cascade", "extractionFns": [inner.extraction, own]}
        return DimensionSpec(inner.dimension, inner.output_name, inner.output_type, fn)
    dim = spec.get("dimension")
    if not dim:
        raise invalid_input("Dimension spec needs 'dimension'")
    out_name = spec.get("outputName") or dim
    out_type = str(spec.get("outputType") or "STRING").upper().replace(" ", "")
    if out_type not in SQL_TYPES:
        raise invalid_input(f"Unsupported outputType [{out_type}]")
    if typ == "default":
        return DimensionSpec(dim, out_name, out_type)
    if typ == "extraction":
        fn = spec.get("extractionFn") or spec.get("dimExtractionFn")
        if not isinstance(fn, dict):
            raise invalid_input("Extraction dimension spec needs 'extractionFn'")
        return DimensionSpec(dim, out_name, out_type, fn)
    if typ == "lookup":  # Druid's LookupDimensionSpec: a registered lookup by ``name``, or an inline ``lookup``
        keep = {k: spec[k] for k in ("retainMissingValue", "replaceMissingValueWith") if k in spec}
        if spec.get("name"):
            return DimensionSpec(dim, out_name, out_type, {"type": "registeredLookup", "lookup": spec["name"], **keep})
        if isinstance(spec.get("lookup"), dict):
            return DimensionSpec(dim, out_name, out_type, {"type": "lookup", "lookup": spec["lookup"], **keep})
        raise invalid_input("Lookup dimension spec needs 'name' (a registered lookup) or 'lookup' (an inline map)")
    if typ in ("listFiltered", "regexFiltered", "prefixFiltered"):
        # single-valued dimensions: filtering the values is a per-row filter on the value
        return DimensionSpec(dim, out_name, out_type, {"type": "__" + typ, **spec})
    raise unsupported(f"Dimension spec type [{typ}] is not supported")


def extraction_sql(fn: dict[str, Any], value: str, src_type: str, ctx: QueryContext | None) -> str:
    """SQL applying extraction function ``fn`` to ``value``; the result is a string (or NULL)."""
    typ = fn.get("type")
    s = value if src_type == "STRING" else f"CAST({value} AS VARCHAR)"
    if typ == "substring":
        idx = int(fn.get("index", 0))
        length = fn.get("length")
        tail = f"substr({s}, {idx + 1})" if length is None else f"substr({s}, {idx + 1}, {int(length)})"
        return f"CASE WHEN length({s}) <= {idx} THEN NULL ELSE {tail} END"
    if typ == "strlen":
        return f"CAST(length({s}) AS VARCHAR)"
    if typ == "upper":
        return f"upper({s})"
    if typ == "lower":
        return f"lower({s})"
    if typ == "regex":
        expr = fn.get("expr")
        idx = int(fn.get("index", 1))
        missing = _s(fn["replaceMissingValueWith"]) if fn.get("replaceMissingValue") and fn.get(
            "replaceMissingValueWith") is not None else ("NULL" if fn.get("replaceMissingValue") else s)
        return (f"CASE WHEN regexp_matches({s}, {_s(expr)}) THEN regexp_extract({s}, {_s(expr)}, {idx}) "
                f"ELSE {missing} END")
    if typ == "partial":
        return f"CASE WHEN regexp_matches({s}, {_s(fn.get('expr'))}) THEN {s} ELSE NULL END"
    if typ == "searchQuery":
        qs = fn.get("query") or {}
        return f"CASE WHEN {search_match_sql(qs, s)} THEN {s} ELSE NULL END"
    if typ == "lookup":
        lk = fn.get("lookup") or {}
        if lk.get("type", "map") != "map":
            raise unsupported(f"lookup type [{lk.get('type')}] is not supported")
        mapping = lk.get("map") or {}
        other = _missing_value_sql(fn, s)
        if not mapping:
            return other
        whens = " ".join(f"WHEN {_s(k)} THEN {'NULL' if v is None else _s(v)}" for k, v in mapping.items())
        return f"CASE {s} {whens} ELSE {other} END"
    if typ == "registeredLookup":
        name = fn.get("lookup")
        loaded = ctx.state.lookups.get(name) if ctx is not None else None
        if loaded is None:
            raise invalid_input(f"Lookup [{name}] not found")
        found = value_sql(loaded, s)
        other = _missing_value_sql(fn, s)
        return found if other == "NULL" else f"COALESCE({found}, {other})"
    if typ == "timeFormat":
        return _time_format_sql(fn, value, src_type, ctx)
    if typ == "time":
        from_fmt = joda_to_strftime(fn.get("timeFormat") or "yyyy-MM-dd'T'HH:mm:ss.SSSZZ")
        to_fmt = joda_to_strftime(fn.get("resultFormat") or "yyyy-MM-dd'T'HH:mm:ss.SSSZZ")
        return f"strftime(try_strptime({s}, {_s(from_fmt)}), {_s(to_fmt)})"
    if typ == "stringFormat":
        fmt = str(fn.get("format", "%s"))
        nh = fn.get("nullHandling", "nullString")
        arg = {"nullString": f"coalesce({s}, 'null')", "emptyString": f"coalesce({s}, '')"}.get(nh, s)
        out = f"printf({_s(fmt)}, {arg})"
        return f"CASE WHEN {s} IS NULL THEN NULL ELSE {out} END" if nh == "returnNull" else out
    if typ == "bucket":
        size = float(fn.get("size", 1))
        off = float(fn.get("offset", 0))
        num = value if src_type != "STRING" else f"TRY_CAST({value} AS DOUBLE)"
        b = f"(floor(({num} - {off}) / {size}) * {size} + {off})"
        return f"CAST(CAST({b} AS BIGINT) AS VARCHAR)" if size == int(size) and off == int(off) else \
            f"CAST({b} AS VARCHAR)"
    if typ == "cascade":
        out, t = value, src_type
        for sub in fn.get("extractionFns") or []:
            out, t = extraction_sql(sub, out, t, ctx), "STRING"
        return out if t == "STRING" else f"CAST({out} AS VARCHAR)"
    if typ == "identity":
        return s
    if typ in ("__listFiltered", "__regexFiltered", "__prefixFiltered"):
        return _filtered_dim_sql(fn, s)
    if typ == "javascript":
        raise unsupported("JavaScript extraction functions are disabled")
    raise unsupported(f"Extraction function type [{typ}] is not supported")


def _missing_value_sql(fn: dict[str, Any], s: str) -> str:
    """What a lookup extraction gives for a key its lookup lacks: the key itself
    (``retainMissingValue``), ``replaceMissingValueWith``, or NULL."""
    if fn.get("retainMissingValue"):
        if fn.get("replaceMissingValueWith") not in (None, ""):
            raise invalid_input("Cannot specify a [replaceMissingValueWith] and set [retainMissingValue] to true")
        return s
    if fn.get("replaceMissingValueWith") is not None:
        return _s(fn["replaceMissingValueWith"])
    return "NULL"


def _filter_cond(spec: dict[str, Any], s: str) -> str:
    """Whether the value ``s`` is kept by a list/regex/prefix-filtered dimension spec."""
    typ = spec["type"]
    if typ == "__listFiltered":
        vals = spec.get("values") or []
        inlist = ", ".join(_s(v) for v in vals) or "NULL"
        cond = f"{s} IN ({inlist})"
        # a NULL value is in no list: a deny list keeps it, as Druid does
        return f"coalesce(NOT ({cond}), true)" if spec.get("isWhitelist", True) is False else cond
    if typ == "__regexFiltered":
        return f"regexp_matches({s}, {_s(spec.get('pattern'))})"
    return f"starts_with({s}, {_s(spec.get('prefix'))})"


def _filtered_dim_sql(spec: dict[str, Any], s: str) -> str:
    cond = _filter_cond(spec, s)
    return f"CASE WHEN {cond} THEN {s} ELSE NULL END"


def kept_values_lambda(d: DimensionSpec) -> str | None:
    """For a filtered dimension spec over a multi-value dimension: the lambda keeping its values
    (``lambda __v: __v IN ('a', 'b')``), applied to each row's list before it is exploded — Druid drops
    the other values, and a row left without any counts once, with NULL."""
    fn = d.extraction
    if not isinstance(fn, dict) or fn.get("type") not in ("__listFiltered", "__regexFiltered", "__prefixFiltered"):
        return None
    return f"lambda __v: coalesce({_filter_cond(fn, '__v')}, FALSE)"


def _time_format_sql(fn: dict[str, Any], value: str, src_type: str, ctx: QueryContext | None) -> str:

    tz = fn.get("timeZone") or "UTC"
    ms = value if src_type == "LONG" else f"epoch_ms(TRY_CAST({value} AS TIMESTAMP))"
    gran = fn.get("granularity")
    if gran is not None:
        try:
            g = Granularity.parse(gran)
        except GranularityError as e:
            raise invalid_input(f"Invalid granularity in timeFormat: {e}") from e
        if g.kind != "all":
            b = bucket_sql(g, ctx.cursor if ctx is not None else None)
            if b is None:
                raise invalid_input("bad granularity")
            ms = b.replace('epoch_ms("__time")', f"({ms})").replace('"__time"', f"epoch_ms({ms})")
    if fn.get("asMillis"):
        return f"CAST({ms} AS VARCHAR)"
    fmt = fn.get("format")
    ts = f"epoch_ms(CAST({ms} AS BIGINT))"
    if tz.upper() != "UTC":
        ts = f"timezone({_s(tz)}, timezone('UTC', {ts}))"
    if not fmt:
        fmt = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'" if tz.upper() == "UTC" else "yyyy-MM-dd'T'HH:mm:ss.SSS"
    try:
        code = joda_to_strftime(fmt)
    except ValueError as e:
        raise invalid_input(f"Invalid timeFormat pattern [{fmt}]: {e}") from e
    return f"strftime({ts}, {_s(code)})"


def search_match_sql(spec: dict[str, Any], s: str) -> str:
    """A search query spec (``insensitive_contains``, ``contains``, ``fragment``, ``regex``) as SQL."""
    typ = spec.get("type", "insensitive_contains")
    if typ == "insensitive_contains":
        return f"contains(lower({s}), lower({_s(spec.get('value', ''))}))"
    if typ == "contains":
        if spec.get("caseSensitive", False):
            return f"contains({s}, {_s(spec.get('value', ''))})"
        return f"contains(lower({s}), lower({_s(spec.get('value', ''))}))"
    if typ == "fragment":
        vals = spec.get("values") or []
        if spec.get("caseSensitive", False):
            parts = [f"contains({s}, {_s(v)})" for v in vals]
        else:
            parts = [f"contains(lower({s}), lower({_s(v)}))" for v in vals]
        return "(" + " AND ".join(parts) + ")" if parts else f"({s} IS NOT NULL)"
    if typ == "regex":
        return f"regexp_matches({s}, {_s(spec.get('pattern', ''))})"
    raise invalid_input(f"Unknown search query type [{typ}]")
