"""Virtual columns → SQL: ``{"type":"expression","name","expression","outputType"}``, and Druid's
``{"type":"nested-field","columnName","outputName","path" (or "pathParts"),"expectedType"}`` — the
``json_value`` expression of that column and path (a scalar; objects and arrays are null)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from radstack.expressions import Compiled, scalar_of_mapped
from serving.errors import invalid_input, unsupported


class ExpressionScope(Protocol):
    """What a virtual column needs of the query it belongs to (a :class:`~serving.broker.native.query_context.QueryContext`)."""

    column_types: dict[str, str]

    def expression(self, text: str, column_types: dict[str, str] | None = None) -> Compiled: ...

OUTPUT_TYPES = {"STRING", "LONG", "FLOAT", "DOUBLE"}


@dataclass(frozen=True)
class VirtualColumn:
    name: str
    sql: str
    output_type: str | None
    #: a multi-value string column (a list of strings): a STRING expression mapped over the values of a
    #: multi-value column, as Druid gives it (grouped value by value, filtered by any value)
    multi_value: bool = False


def parse_virtual_columns(specs: list[Any], ctx: ExpressionScope) -> list[VirtualColumn]:
    out = []
    for spec in specs:
        if not isinstance(spec, dict):
            raise invalid_input(f"Invalid virtual column {spec!r}")
        typ = spec.get("type", "expression")
        if typ == "nested-field":
            spec = _nested_field_as_expression(spec)
        elif typ != "expression":
            raise unsupported(f"Virtual column type [{typ}] is not supported")
        name, expr = spec.get("name"), spec.get("expression")
        if not name or expr is None:
            raise invalid_input("Virtual column needs 'name' and 'expression'")
        out_type = spec.get("outputType")
        if out_type is not None:
            out_type = str(out_type).upper()
            if out_type not in OUTPUT_TYPES:
                raise invalid_input(f"Unsupported outputType [{out_type}] for virtual column [{name}]")
        compiled = ctx.expression(str(expr))
        if compiled.mapped and (out_type or compiled.type or "STRING") == "STRING":
            sql = f"list_transform({compiled.sql}, lambda __v: CAST(__v AS VARCHAR))"
            out.append(VirtualColumn(name, sql, None, multi_value=True))
            out_type = "STRING"
        else:  # a numeric result read from a mapped list: its one value (Druid's numeric selector)
            out.append(VirtualColumn(name, scalar_of_mapped(compiled), out_type))
        # later virtual columns may refer to this one
        ctx.column_types[name] = out_type or "STRING"
    return out


def _nested_field_as_expression(spec: dict[str, Any]) -> dict[str, Any]:
    column, name = spec.get("columnName"), spec.get("outputName")
    if not isinstance(column, str) or not isinstance(name, str) or not name:
        raise invalid_input("Virtual column [nested-field] needs 'columnName' and 'outputName'")
    path = spec.get("path")
    if path is None and isinstance(spec.get("pathParts"), list):
        path = "$"
        for part in spec["pathParts"]:
            if not isinstance(part, dict):
                raise invalid_input(f"Invalid pathParts element {part!r} of virtual column [{name}]")
            if part.get("type") == "arrayElement":
                path += f"[{int(part.get('index', 0))}]"
            else:
                path += "." + str(part.get("field"))
    if not isinstance(path, str):
        raise invalid_input(f"Virtual column [{name}] needs a 'path' or 'pathParts'")
    out_type = str(spec.get("expectedType") or "STRING").upper()
    quoted_col = '"' + column.replace('"', '\\"') + '"'
    quoted_path = "'" + path.replace("'", "\\'") + "'"
    return {"name": name, "expression": f"json_value({quoted_col}, {quoted_path}, '{out_type}')",
            "outputType": out_type}
