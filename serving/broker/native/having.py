"""groupBy ``having`` specs → SQL over the output row (dimensions, aggregators, post-aggregators)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from serving.broker.native.dimensions import extraction_sql
from serving.broker.native.query_context import q
from serving.errors import invalid_input, unsupported

if TYPE_CHECKING:
    from serving.broker.native.query_context import QueryContext


def having_sql(spec: Any, row_types: dict[str, str], ctx: QueryContext) -> str:
    if not isinstance(spec, dict):
        raise invalid_input(f"Invalid having spec {spec!r}")
    typ = spec.get("type")
    if typ in ("greaterThan", "lessThan", "equalTo"):
        name = spec.get("aggregation")
        if name not in row_types:
            raise invalid_input(f"having references unknown aggregation [{name}]")
        value = spec.get("value")
        if isinstance(value, bool) or not isinstance(value, int | float):
            try:
                value = float(value)  # type: ignore[arg-type]
            except (TypeError, ValueError) as e:
                raise invalid_input(f"having value must be numeric, got {value!r}") from e
        op = {"greaterThan": ">", "lessThan": "<", "equalTo": "="}[typ]
        return f"(CAST({q(name)} AS DOUBLE) {op} {float(value)!r})"
    if typ == "dimSelector":
        dim = spec.get("dimension")
        value = spec.get("value")
        col = q(dim) if dim in row_types else "NULL"
        if spec.get("extractionFn"):

            col = extraction_sql(spec["extractionFn"], col, row_types.get(dim, "STRING"), ctx)
        if value is None:
            return f"({col} IS NULL)"
        return f"(CAST({col} AS VARCHAR) = '{str(value).replace(chr(39), chr(39) * 2)}')"
    if typ in ("and", "or"):
        parts = [having_sql(s, row_types, ctx) for s in spec.get("havingSpecs") or []]
        if not parts:
            return "TRUE" if typ == "and" else "FALSE"
        return "(" + f" {typ.upper()} ".join(parts) + ")"
    if typ == "not":
        return f"(NOT coalesce({having_sql(spec.get('havingSpec'), row_types, ctx)}, FALSE))"
    if typ == "filter":
        return "(" + ctx.filter_sql(spec.get("filter"), row_types) + ")"
    if typ == "always":
        return "TRUE"
    if typ == "never":
        return "FALSE"
    raise unsupported(f"Having spec type [{typ}] is not supported")
