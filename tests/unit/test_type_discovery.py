"""Druid's type-aware schema discovery (``auto`` dimensions without ``castToType``,
``useSchemaDiscovery``) and the JSON expression functions of transforms, through the indexer. The
expected types are the ones Druid 33 reports for the same rows in its QA suite (qaArray's
INFORMATION_SCHEMA cases): booleans as longs, all-null arrays as ARRAY<LONG>, mixed arrays as
ARRAY<STRING>, nested arrays as COMPLEX<json>, all-null scalars as VARCHAR."""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa
import pytest

from radstack.spec import SpecError, load_datasource_spec, parse_data_schema
from radstack.storage.indexer import build_segment_tables
from radstack.storage.type_discovery import discover_type
from serving.overlord.input_formats import rows_to_batch

ROWS = [
    {"ts": "2022-01-01T00:00:00Z", "a_bool": [True, False, None], "a_int": [1, 2, None], "a_float": [0.1, 0.2, None],
     "a_str": ["S1", "S2", None], "a_null": [None, None, None], "a_empty": [], "a_mixed": [True, 1, 0.1, "S1", None],
     "a_nested": [[True, False], {"x": 1}], "obj": {"k": [1, 2]}, "n": 3, "f": 1.5, "s": "text", "none": None,
     "nums": 7},
    {"ts": "2022-01-02T00:00:00Z", "a_bool": None, "a_int": [3], "a_float": [1], "a_str": [], "a_null": [],
     "a_empty": [], "a_mixed": ["x"], "a_nested": None, "obj": None, "n": 4, "f": 2, "s": None, "none": None,
     "nums": 2.5},
]


def _schema(dimensions: list[Any], transform_spec: dict[str, Any] | None = None, **dims_spec: Any) -> Any:
    return parse_data_schema({
        "dataSource": "t", "timestampSpec": {"column": "ts", "format": "iso"},
        "dimensionsSpec": {"dimensions": dimensions, **dims_spec},
        "granularitySpec": {"segmentGranularity": "month", "queryGranularity": "none", "rollup": False},
        **({"transformSpec": transform_spec} if transform_spec else {}),
    })


def _build(schema: Any, rows: list[dict[str, Any]] = ROWS) -> tuple[dict[str, str], list[dict[str, Any]]]:
    pieces, dims, _stats = build_segment_tables(rows_to_batch(rows), schema)
    table = pa.concat_tables([p.table for p in pieces])
    return {d.name: d.type for d in dims}, table.to_pylist()


def test_auto_dimensions_are_typed_as_druid_types_them() -> None:
    names = [k for k in ROWS[0] if k != "ts"]
    types, rows = _build(_schema([{"type": "auto", "name": n} for n in names]))
    assert types == {
        "a_bool": "array<long>", "a_int": "array<long>", "a_float": "array<double>", "a_str": "array<string>",
        "a_null": "array<long>", "a_empty": "array<long>", "a_mixed": "array<string>", "a_nested": "json",
        "obj": "json", "n": "long", "f": "double", "s": "string", "none": "string", "nums": "double",
    }
    first = rows[0]
    assert first["a_bool"] == [1, 0, None]  # booleans are longs, as Druid stores them
    assert first["a_mixed"] == ["true", "1", "0.1", "S1", None]
    assert first["a_null"] == [None, None, None] and first["a_empty"] == []
    assert orjson.loads(first["obj"]) == {"k": [1, 2]}
    assert rows[1]["f"] == 2.0 and rows[1]["a_float"] == [1.0]


def test_use_schema_discovery_adds_the_undeclared_columns_after_the_declared_ones() -> None:
    types, _ = _build(_schema([{"type": "string", "name": "s"}], useSchemaDiscovery=True))
    assert list(types)[0] == "s" and types["s"] == "string"
    assert types["a_int"] == "array<long>" and types["obj"] == "json" and types["n"] == "long"
    assert "ts" not in types


def test_json_transforms_give_typed_columns() -> None:
    transforms = [
        {"type": "expression", "name": "t_bool", "expression": "json_value(a_bool, '$[0]')"},
        {"type": "expression", "name": "t_str", "expression": "json_value(a_str, '$[0]')"},
        {"type": "expression", "name": "t_float", "expression": "json_value(a_float, '$[0]')"},
        {"type": "expression", "name": "t_null", "expression": "json_value(a_null, '$[0]')"},
        {"type": "expression", "name": "q_obj", "expression": "json_query(obj, '$')"},
        {"type": "expression", "name": "q_str", "expression": "json_query(s, '$')"},
        {"type": "expression", "name": "p", "expression": "parse_json(to_json_string(json_query(obj, '$.k')))"},
        {"type": "expression", "name": "o", "expression": "json_object('n', n, 's', s)"},
    ]
    dims = [{"type": "auto", "name": t["name"]} for t in transforms]
    types, rows = _build(_schema(dims, {"transforms": transforms}))
    assert types == {"t_bool": "long", "t_str": "string", "t_float": "double", "t_null": "string",
                     "q_obj": "json", "q_str": "string", "p": "array<long>", "o": "json"}
    assert [r["t_bool"] for r in rows] == [1, None]
    assert [r["t_str"] for r in rows] == ["S1", None]
    assert [r["q_str"] for r in rows] == ["text", None]  # a JSON string is stored unquoted
    assert rows[0]["p"] == [1, 2]
    assert orjson.loads(rows[0]["o"]) == {"n": 3, "s": "text"}


@pytest.mark.parametrize(("values", "expected"), [
    (pa.array([1, None]), "long"), (pa.array([True]), "long"), (pa.array([0.5]), "double"),
    (pa.array([None, None]), "string"), (pa.array(["[1, 2]", "[3.5]"]), "array<double>"),
    (pa.array(['["a", 1]', "b"]), "array<string>"), (pa.array(["[[1]]"]), "json"),
    (pa.array(["[not json"]), "string"), (pa.array([[1, 2], None]), "array<long>"),
    (pa.array([{"a": 1}]), "json"),
])
def test_discover_type(values: pa.Array, expected: str) -> None:
    assert discover_type(values) == expected


def test_a_datasource_spec_must_declare_its_types() -> None:
    spec = {"dataSchema": {"dataSource": "d", "timestampSpec": {"column": "ts"},
                           "dimensionsSpec": {"dimensions": [{"type": "auto", "name": "x"}]}}}
    with pytest.raises(SpecError, match="castToType"):
        load_datasource_spec(spec)
