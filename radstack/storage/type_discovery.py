"""Druid's type-aware schema discovery for ``auto`` dimensions: the stored type of a column is chosen
from the values a native batch task reads, as Druid's ``auto`` indexer chooses it.

* scalars: ``long`` (integers and booleans, which Druid stores as 1/0), ``double`` (any fraction), else
  ``string``; mixed scalars take the least restrictive of them (long < double < string); a column
  with no value at all is ``string``;
* arrays of scalars: ``array<long|double|string>`` by the same rule over their elements (and over any
  scalars of the same column); arrays whose elements are all null, or empty, are ``array<long>``;
* objects, and arrays holding arrays or objects: ``json`` (Druid's ``COMPLEX<json>``).

Input readers hand nested values over as JSON text, so a string column is scanned for values that
start with ``[`` or ``{`` and parse as JSON; a plain string that happens to look like a JSON array is
read as one (the same reading a multi-value dimension makes of such text).

A ``string`` dimension declared without ``multiValueHandling`` is Druid's default ``SORTED_ARRAY``: it
stays a plain string column unless some row gives it an array (a list column, or a JSON input's array
— the caller says whether the text holds nested values), and then it is a multi-value dimension
(values sorted, NULL elements kept, an empty array NULL), as Druid's string indexer makes it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import replace

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from radstack.spec import DimensionSchema

__all__ = ["discover_dimension_types", "discover_type", "holds_arrays"]

_RANK = {"long": 0, "double": 1, "string": 2}


def _least(kinds: Iterable[str]) -> str | None:
    best: str | None = None
    for k in kinds:
        if best is None or _RANK[k] > _RANK[best]:
            best = k
    return best


def _scalar_kind(v: object) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool | int):
        return "long"
    if isinstance(v, float):
        return "double"
    return "string"


def _arrow_kind(t: pa.DataType) -> str | None:
    """The type of a column that is not text: None when its values must be looked at."""
    if pa.types.is_boolean(t) or pa.types.is_integer(t):
        return "long"
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "double"
    if pa.types.is_null(t):
        return "string"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        inner = t.value_type
        if pa.types.is_nested(inner):
            return "json"
        if pa.types.is_null(inner):
            return "array<long>"
        elem = _arrow_kind(inner)
        return f"array<{elem}>" if elem in ("long", "double") else "array<string>"
    if pa.types.is_struct(t) or pa.types.is_map(t):
        return "json"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return None
    return "string"


def holds_arrays(column: pa.ChunkedArray | pa.Array, *, in_text: bool = False) -> bool:
    """Whether some value of ``column`` is an array: a list column, or (``in_text``: the column holds a
    JSON input's nested values as text) JSON text of an array — a CSV or TSV value ``[]`` is a string."""
    t = column.type
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return True
    if not in_text or not (pa.types.is_string(t) or pa.types.is_large_string(t)):
        return False
    text = column if isinstance(column, pa.ChunkedArray) else pa.chunked_array([column])
    candidates = pc.filter(text, pc.fill_null(pc.starts_with(text, "["), False))
    for raw in candidates.to_pylist():
        try:
            if isinstance(orjson.loads(raw), list):
                return True
        except orjson.JSONDecodeError:
            continue
    return False


def discover_type(column: pa.ChunkedArray | pa.Array, *, is_json: bool = False) -> str:
    """The stored type (``long``, ``double``, ``string``, ``array<…>``, ``json``) of one column;
    ``is_json``: every value is JSON text (a JSON function's output), scalars included."""
    known = _arrow_kind(column.type)
    if known is not None:
        return known
    text = column if isinstance(column, pa.ChunkedArray) else pa.chunked_array([column])
    scalars: set[str] = set()
    if is_json:
        nested = [v for v in text.to_pylist() if v is not None]
    else:
        looks_nested = pc.or_kleene(pc.starts_with(text, "["), pc.starts_with(text, "{"))
        nested = pc.filter(text, pc.fill_null(looks_nested, False)).to_pylist()
        if len(nested) < len(text) - text.null_count:
            scalars.add("string")
    elems: set[str] = set()
    any_array = False
    for raw in nested:
        try:
            v = orjson.loads(raw)
        except orjson.JSONDecodeError:
            scalars.add("string")
            continue
        if isinstance(v, dict):
            return "json"
        if not isinstance(v, list):
            k = _scalar_kind(v) if is_json else "string"
            if k is not None:
                scalars.add(k)
            continue
        any_array = True
        for e in v:
            if isinstance(e, list | dict):
                return "json"
            k = _scalar_kind(e)
            if k is not None:
                elems.add(k)
    if any_array:
        return f"array<{_least(elems | scalars) or 'long'}>"
    return _least(scalars) or "string"


def discover_dimension_types(
    table: pa.Table, dims: Sequence[DimensionSchema], json_columns: Collection[str] = (), *,
    arrays_in_text: bool = False,
) -> tuple[tuple[DimensionSchema, ...], pa.Table]:
    """``dims`` with every ``auto`` type replaced by the type its column's values call for (a column
    the rows do not have is ``string``, all null), and the table with every JSON column
    (``json_columns``: JSON text, scalars included) that feeds a scalar dimension turned into those
    scalars (a JSON string unquoted, ``true``/``false`` → 1/0), as Druid stores them."""
    out = []
    for d in dims:
        if d.type == "string" and not d.multi_value_handling and d.name in table.column_names \
                and d.name not in json_columns and holds_arrays(table.column(d.name), in_text=arrays_in_text):
            d = replace(d, multi_value_handling="SORTED_ARRAY")
        if d.is_discovered:
            present = d.name in table.column_names
            typ = discover_type(table.column(d.name), is_json=d.name in json_columns) if present else "string"
            d = replace(d, type=typ)
        if d.name in json_columns and d.name in table.column_names and not d.is_array and d.type != "json" \
                and not d.multi_value_handling:
            i = table.schema.get_field_index(d.name)
            table = table.set_column(i, d.name, _json_scalars(table.column(d.name), d.type))
        out.append(d)
    return tuple(out), table


def _json_scalars(column: pa.ChunkedArray, typ: str) -> pa.Array:
    values = []
    for raw in column.to_pylist():
        v = None if raw is None else orjson.loads(raw)
        if isinstance(v, bool):
            v = int(v)
        if isinstance(v, list | dict):
            v = orjson.dumps(v).decode()
        if typ == "string" and v is not None:
            v = v if isinstance(v, str) else orjson.dumps(v).decode()
        values.append(v)
    if typ == "string":
        return pa.array(values, pa.string())
    try:
        return pa.array(values, pa.float64() if typ in ("double", "float") else None)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else str(v) for v in values], pa.string())
