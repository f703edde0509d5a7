"""Native aggregators → DuckDB aggregate expressions.

Each aggregator spec becomes an :class:`Aggregator`: its output name, the aggregate SQL over the base
relation, its Druid type (for rendering and ordering) and the value an empty timeseries bucket gets
(Druid's SQL-compatible null handling: ``count`` → 0, sums/min/max/first/last → null, distinct
counts → 0). Re-aggregation is inherent: rows with equal (time, dims) from different segments are
simply aggregated together.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from radstack.projections import ROWS_COLUMN
from radstack.sketches import SketchParamError, parse_params
from radstack.sql_text import quote_identifier
from serving.broker.native.dimensions import parse_dimension
from serving.errors import invalid_input, unsupported

if TYPE_CHECKING:
    from serving.broker.native.query_context import QueryContext


@dataclass(frozen=True)
class Aggregator:
    name: str
    sql: str
    type: str  # LONG | DOUBLE | FLOAT | STRING | COMPLEX
    empty: Any = None
    spec: dict[str, Any] | None = None


_NUM = {"long": ("BIGINT", "LONG"), "double": ("DOUBLE", "DOUBLE"), "float": ("FLOAT", "FLOAT")}
_LENIENT = {"min": "doubleMin", "max": "doubleMax", "sum": "doubleSum"}


def _field(spec: dict[str, Any], ctx: QueryContext, sql_type: str) -> str:
    """The aggregated input: ``fieldName`` (cast to the aggregator's type) or ``expression``."""
    if spec.get("expression") is not None:
        return f"CAST({ctx.expression_sql(str(spec['expression']))} AS {sql_type})"
    name = spec.get("fieldName")
    if not name:
        raise invalid_input(f"Aggregator [{spec.get('name')}] needs 'fieldName' or 'expression'")
    col = ctx.col(name)
    src = ctx.col_type(name)
    if sql_type == "BIGINT" and src in ("DOUBLE", "FLOAT"):
        return f"CAST(trunc({col}) AS BIGINT)"
    if src == "STRING":
        if sql_type == "BIGINT":
            return f"CAST(trunc(TRY_CAST({col} AS DOUBLE)) AS BIGINT)"
        return f"TRY_CAST({col} AS {sql_type})"
    if (sql_type == "BIGINT" and src == "LONG") or (sql_type == "DOUBLE" and src == "DOUBLE"):
        return col
    return f"CAST({col} AS {sql_type})"


def _sketch_aggregator(name: str, typ: str, spec: dict[str, Any], ctx: QueryContext) -> Aggregator:
    """HLL and theta sketch aggregators (radstack/sketches/): the group's values, or the sketches of a
    sketch column, merged into one sketch and finalized to its estimate, as Druid finalizes them."""
    x = spec.get("fieldName")
    if not x:
        raise invalid_input(f"Aggregator [{name}] needs 'fieldName'")
    family = "thetaSketch" if typ == "thetaSketch" else "HLLSketch"
    try:
        params = parse_params("thetaSketch" if family == "thetaSketch" else "HLLSketchBuild", spec)
    except SketchParamError as e:
        raise invalid_input(f"Aggregator [{name}]: {e}") from e
    merge = ctx.col_type(x) == f"COMPLEX<{family}>"
    # DISTINCT values: a repeat cannot change an HLL or theta sketch (rules/sketches.py, _collected)
    values = f"list({ctx.col(x)})" if merge else f"list(DISTINCT CAST({ctx.col(x)} AS VARCHAR))"
    fn = ("DRUID_HLL_MERGE" if merge else "DRUID_HLL_BUILD") if family == "HLLSketch" else (
        "DRUID_THETA_MERGE" if merge else "DRUID_THETA_BUILD")
    if merge and x in ctx.singles:  # every row's sketch is one value, beside it: no image to collect
        fn, values = f"{fn}_SINGLES", f"CAST(NULL AS BLOB[]), list({quote_identifier(ctx.singles[x])})"
    if family == "HLLSketch":
        sketch = f"{fn}({values}, {params.lg_k}, '{params.tgt_hll_type}')"
    else:
        sketch = f"{fn}({values}, {1 << params.lg_k})"
    estimate = f"DRUID_SKETCH_ESTIMATE({sketch})"
    if spec.get("round"):
        return Aggregator(name, f"CAST(round({estimate}) AS BIGINT)", "LONG", 0, spec)
    return Aggregator(name, estimate, "DOUBLE", 0.0, spec)


QUANTILES = "COMPLEX<quantilesDoublesSketch>"


def _quantiles_aggregator(name: str, spec: dict[str, Any], ctx: QueryContext) -> Aggregator:
    """A quantiles sketch of the group's values (or the merge of a sketch column's sketches). The row
    holds the sketch, for the ``quantilesDoublesSketchTo…`` post-aggregators; the result shows its count
    of values, as Druid finalizes this aggregator (:func:`serving.broker.native.results.render`)."""
    x = spec.get("fieldName")
    if not x:
        raise invalid_input(f"Aggregator [{name}] needs 'fieldName'")
    try:
        params = parse_params("quantilesDoublesSketch", spec)
    except SketchParamError as e:
        raise invalid_input(f"Aggregator [{name}]: {e}") from e
    if ctx.col_type(x) == QUANTILES:
        sql = f"DRUID_QUANTILES_MERGE(list({ctx.col(x)}), {params.k})"
    else:
        sql = f"DRUID_QUANTILES_BUILD(list(TRY_CAST({ctx.col(x)} AS DOUBLE)), {params.k})"
    return Aggregator(name, sql, QUANTILES, None, spec)


def merged_sketch_columns(specs: Any) -> set[str]:
    """The columns HLL and theta sketch aggregators of ``specs`` (filtered ones too) read: a merge where
    they are sketch columns (:meth:`QueryContext.read_singles`)."""
    out: set[str] = set()
    stack = list(specs) if isinstance(specs, list) else []
    while stack:
        spec = stack.pop()
        if not isinstance(spec, dict):
            continue
        typ = _LENIENT.get(str(spec.get("type")), str(spec.get("type")))
        if typ == "filtered":
            stack.append(spec.get("aggregator"))
        elif typ in ("thetaSketch", "HLLSketchBuild", "HLLSketchMerge", "HLLSketch") and isinstance(
                spec.get("fieldName"), str):
            out.add(spec["fieldName"])
    return out


def parse_aggregator(spec: Any, ctx: QueryContext) -> Aggregator:
    if not isinstance(spec, dict) or "type" not in spec:
        raise invalid_input(f"Invalid aggregator {spec!r}")
    typ = str(spec["type"])
    typ = _LENIENT.get(typ, typ)
    name = spec.get("name")
    if typ == "filtered":
        inner = spec.get("aggregator")
        if not isinstance(inner, dict):
            raise invalid_input("filtered aggregator needs 'aggregator'")
        agg = parse_aggregator(inner, ctx)
        cond = ctx.filter_sql(spec.get("filter")) if spec.get("filter") else "TRUE"
        out_name = name or agg.name
        return replace(agg, name=out_name, sql=_add_filter(agg.sql, cond), spec=spec)
    if not name:
        raise invalid_input(f"Aggregator of type [{typ}] needs a 'name'")
    if typ == "count":
        if ctx.projection is not None:  # each projection row stands for __rows base rows
            return Aggregator(name, f'CAST(coalesce(sum("{ROWS_COLUMN}"), 0) AS BIGINT)', "LONG", 0, spec)
        return Aggregator(name, "count(*)", "LONG", 0, spec)
    for prefix, (sql_type, dtype) in _NUM.items():
        if typ in (f"{prefix}Sum", f"{prefix}Min", f"{prefix}Max"):
            fn = typ[len(prefix):].lower()
            x = _field(spec, ctx, sql_type)
            sql = f"{fn}({x})"
            if fn == "sum":
                sql = f"CAST(sum({x}) AS {sql_type})"
            return Aggregator(name, sql, dtype, None, spec)
        if typ in (f"{prefix}First", f"{prefix}Last"):
            x = _field(spec, ctx, sql_type)
            fn = "arg_min" if typ.endswith("First") else "arg_max"
            return Aggregator(name, f"{fn}({x}, \"__time\")", dtype, None, spec)
        if typ == f"{prefix}Any":
            return Aggregator(name, f"any_value({_field(spec, ctx, sql_type)})", dtype, None, spec)
    if typ in ("stringFirst", "stringLast", "stringAny", "stringFirstFold", "stringLastFold"):
        x = spec.get("fieldName")
        col = ctx.col(x) if x else "NULL"
        if ctx.col_type(x or "") != "STRING":
            col = f"CAST({col} AS VARCHAR)"
        max_bytes = int(spec.get("maxStringBytes", 1024))
        # cut to maxStringBytes of UTF-8, never splitting a character (the UDF serving/broker/store/udfs.py
        # registers for native queries too)
        if typ == "stringAny":
            return Aggregator(name, f"DRUID_CHOP_BYTES(any_value({col}), {max_bytes})", "STRING", None, spec)
        fn = "arg_min" if "First" in typ else "arg_max"
        return Aggregator(name, f"DRUID_CHOP_BYTES({fn}({col}, \"__time\"), {max_bytes})", "STRING", None, spec)
    if typ == "doubleMean":
        return Aggregator(name, f"avg({_field(spec, ctx, 'DOUBLE')})", "DOUBLE", None, spec)
    if typ == "cardinality":
        return Aggregator(name, _cardinality_sql(spec, ctx), "DOUBLE", 0.0, spec)
    if typ in ("thetaSketch", "HLLSketchBuild", "HLLSketchMerge", "HLLSketch"):
        return _sketch_aggregator(name, typ, spec, ctx)
    if typ == "quantilesDoublesSketch":
        return _quantiles_aggregator(name, spec, ctx)
    if typ in ("hyperUnique", "approxCountDistinct"):
        x = spec.get("fieldName")
        if not x:
            raise invalid_input(f"Aggregator [{name}] needs 'fieldName'")
        sql = f"CAST(approx_count_distinct({ctx.col(x)}) AS DOUBLE)"
        if spec.get("round"):
            sql = f"CAST(approx_count_distinct({ctx.col(x)}) AS BIGINT)"
            return Aggregator(name, sql, "LONG", 0, spec)
        return Aggregator(name, sql, "DOUBLE", 0.0, spec)
    if typ == "javascript":
        raise unsupported("JavaScript aggregators are disabled")
    raise unsupported(f"Aggregator type [{spec['type']}] is not supported")


def _cardinality_sql(spec: dict[str, Any], ctx: QueryContext) -> str:
    fields = spec.get("fields") or spec.get("fieldNames") or []
    cols = []
    multi = False  # a multi-value field: its values are counted, not its lists (Druid)
    for f in fields:
        if isinstance(f, dict):

            cols.append(parse_dimension(f).sql(ctx))
        else:
            c = ctx.col(str(f))
            multi = multi or str(f) in ctx.multi_value
            cols.append(c if ctx.col_type(str(f)) == "STRING" else f"CAST({c} AS VARCHAR)")
    if not cols:
        raise invalid_input(f"cardinality aggregator [{spec.get('name')}] needs 'fields'")
    if multi and not spec.get("byRow"):
        lists = ", ".join(f"flatten(list({c}))" if isinstance(f, str) and f in ctx.multi_value else f"list({c})"
                          for f, c in zip(fields, cols, strict=True))
        sql = f"len(list_distinct(flatten([{lists}])))"
    elif spec.get("byRow"):
        key = cols[0] if len(cols) == 1 else "row(" + ", ".join(cols) + ")"
        cond = " OR ".join(f"{c} IS NOT NULL" for c in cols)
        sql = f"count(DISTINCT CASE WHEN {cond} THEN {key} END)"
    elif len(cols) == 1:
        sql = f"count(DISTINCT {cols[0]})"
    else:
        lists = ", ".join(f"list({c})" for c in cols)
        sql = f"len(list_distinct(flatten([{lists}])))"
    if spec.get("round"):
        return f"CAST({sql} AS BIGINT)"
    return f"CAST({sql} AS DOUBLE)"


def _add_filter(sql: str, cond: str) -> str:
    """Add ``FILTER (WHERE cond)`` to every aggregate call in ``sql``."""
    if cond == "TRUE":
        return sql
    for fn in ("count(*)", "count(DISTINCT ", "sum(", "min(", "max(", "avg(", "arg_min(", "arg_max(",
               "any_value(", "approx_count_distinct(", "list("):
        if fn in sql:
            return _wrap_calls(sql, fn, cond)
    raise unsupported("cannot filter this aggregator")


def _wrap_calls(sql: str, fn: str, cond: str) -> str:
    """Append a FILTER clause after each call of ``fn`` (balanced-parenthesis scan)."""
    out, i = [], 0
    while True:
        j = sql.find(fn, i)
        if j < 0:
            out.append(sql[i:])
            break
        k = j + len(fn)
        depth = 0 if fn.endswith(")") else 1
        if depth:
            while k < len(sql) and depth:
                if sql[k] == "(":
                    depth += 1
                elif sql[k] == ")":
                    depth -= 1
                k += 1
        out.append(sql[i:k] + f" FILTER (WHERE {cond})")
        i = k
    return "".join(out)
