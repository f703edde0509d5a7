"""Virtual columns: ``{"type":"expression","name","expression","outputType"}`` → SQL."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from serving.errors import invalid_input, unsupported


class ExpressionScope(Protocol):
    """What a virtual column needs of the query it belongs to (a :class:`~serving.broker.native.context.QueryContext`)."""

    column_types: dict[str, str]

    def expression_sql(self, text: str, column_types: dict[str, str] | None = None) -> str: ...

OUTPUT_TYPES = {"STRING", "LONG", "FLOAT", "DOUBLE"}


@dataclass(frozen=True)
class VirtualColumn:
    name: str
    sql: str
    output_type: str | None


def parse_virtual_columns(specs: list[Any], ctx: ExpressionScope) -> list[VirtualColumn]:
    out = []
    for spec in specs:
        if not isinstance(spec, dict):
            raise invalid_input(f"Invalid virtual column {spec!r}")
        typ = spec.get("type", "expression")
        if typ != "expression":
            raise unsupported(f"Virtual column type [{typ}] is not supported")
        name, expr = spec.get("name"), spec.get("expression")
        if not name or expr is None:
            raise invalid_input("Virtual column needs 'name' and 'expression'")
        out_type = spec.get("outputType")
        if out_type is not None:
            out_type = str(out_type).upper()
            if out_type not in OUTPUT_TYPES:
                raise invalid_input(f"Unsupported outputType [{out_type}] for virtual column [{name}]")
        out.append(VirtualColumn(name, ctx.expression_sql(str(expr)), out_type))
        # later virtual columns may refer to this one
        ctx.column_types[name] = out_type or "STRING"
    return out
