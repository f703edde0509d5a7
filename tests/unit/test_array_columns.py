"""ARRAY columns (``auto`` dimensions cast to ARRAY<STRING|LONG|DOUBLE>) on the real broker (indexer →
deep storage → broker): stored as whole arrays next to a multi-value dimension holding the same
values, they group, filter and unnest as Druid's ARRAY columns do — never exploded — worked out by
hand from the rows below."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from serving.broker.native import run_native_query
from serving.errors import DruidError
from tests.unit.test_sql_execution import run

SCHEMA: dict[str, Any] = {
    "dataSource": "arr",
    "timestampSpec": {"column": "ts", "format": "iso"},
    "dimensionsSpec": {"dimensions": [
        "page",
        {"type": "auto", "name": "tags", "castToType": "ARRAY<STRING>"},
        {"type": "string", "name": "mv", "multiValueHandling": "ARRAY"},
        {"type": "auto", "name": "codes", "castToType": "ARRAY<LONG>"},
        {"type": "auto", "name": "scores", "castToType": "ARRAY<DOUBLE>"},
    ]},
    "metricsSpec": [{"type": "count", "name": "count"}, {"type": "longSum", "name": "added", "fieldName": "added"}],
    "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none", "rollup": False},
}
TAGS = ['["b", "a"]', '["b", "a"]', "[]", None, '["a", "b", "a"]']
ROWS = pa.table({
    "ts": [f"2024-01-01T0{i}:00:00Z" for i in range(1, 6)],
    "page": ["A", "B", "C", "D", "E"],
    "tags": TAGS,
    "mv": TAGS,
    "codes": ["[1, 2]", "[1, 2]", '[3, "x", 4.9]', "7", None],
    "scores": ["[0.5]", "[0.5, 1.5]", "[]", None, "[2]"],
    "added": [1, 2, 4, 8, 16],
})


@pytest.fixture
def env(broker_env: Any) -> Any:
    broker_env.index(ROWS, SCHEMA, version="2024-02-01T00:00:00.000Z")
    broker_env.service.refresh()
    return broker_env


def rows(env: Any, sql: str) -> list[tuple[Any, ...]]:
    return run(env, sql)[1]


def test_stored_values_keep_order_repeats_empty_and_null(env: Any) -> None:
    got = rows(env, "SELECT page, ARRAY_LENGTH(tags), ARRAY_TO_STRING(tags, '|'), ARRAY_TO_STRING(codes, ','), "
                    "ARRAY_LENGTH(scores) FROM arr ORDER BY __time")
    # a NULL element is joined as "null", as Druid does (Druid's QA suite, qaAggFuncs: the lengths of
    # ARRAY_TO_STRING over arrays with NULL elements)
    assert got == [("A", 2, "b|a", "1,2", 1), ("B", 2, "b|a", "1,2", 2), ("C", 0, "", "3,null,4", 0),
                   ("D", None, None, "7", None), ("E", 3, "a|b|a", None, 1)]


def test_group_by_an_array_groups_whole_arrays_where_multi_value_explodes(env: Any) -> None:
    assert rows(env, "SELECT ARRAY_TO_STRING(tags, '|') AS t, SUM(added) FROM arr GROUP BY tags "
                     "ORDER BY 2") == [("b|a", 3), ("", 4), (None, 8), ("a|b|a", 16)]
    assert rows(env, "SELECT mv, SUM(added) FROM arr GROUP BY mv ORDER BY 1 NULLS FIRST") == [
        (None, 12), ("a", 35), ("b", 19)]  # E's repeated "a" counts twice
    assert rows(env, "SELECT COUNT(DISTINCT codes) FROM arr") == [(3,)]


def test_array_functions_filter_without_explosion(env: Any) -> None:
    def added(where: str) -> int | None:
        return rows(env, f"SELECT SUM(added) FROM arr WHERE {where}")[0][0]

    assert added("ARRAY_CONTAINS(tags, 'a')") == 19
    assert added("ARRAY_CONTAINS(codes, 7)") == 8
    assert added("ARRAY_OVERLAP(codes, ARRAY[2, 3])") == 7
    assert added("tags IS NULL") == 8
    assert added("ARRAY_LENGTH(tags) = 0") == 4
    assert added("ARRAY_OFFSET(tags, 0) = 'b'") == 3
    assert added("ARRAY_ORDINAL(scores, 2) > 1") == 2


def test_unnest_an_array_column(env: Any) -> None:
    assert rows(env, "SELECT t, COUNT(*) FROM arr CROSS JOIN UNNEST(tags) AS u(t) GROUP BY t ORDER BY t") == [
        ("a", 4), ("b", 3)]
    assert rows(env, "SELECT SUM(c) FROM arr CROSS JOIN UNNEST(codes) AS u(c) WHERE c IS NOT NULL") == [(20,)]


def test_types_in_information_schema_and_the_schema(env: Any) -> None:
    got = rows(env, "SELECT COLUMN_NAME, DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'arr' "
                    "AND COLUMN_NAME IN ('tags', 'mv', 'codes', 'scores') ORDER BY 1")
    assert got == [("codes", "ARRAY"), ("mv", "VARCHAR"), ("scores", "ARRAY"), ("tags", "ARRAY")]  # as Druid 33
    meta = run_native_query(env.service, {"queryType": "segmentMetadata", "dataSource": "arr",
                                          "intervals": ["2024-01-01/2024-01-02"], "merge": True})
    columns = meta[0]["columns"]
    assert {c: columns[c]["type"] for c in ("tags", "mv", "codes", "scores")} == {
        "tags": "ARRAY<STRING>", "mv": "STRING", "codes": "ARRAY<LONG>", "scores": "ARRAY<DOUBLE>"}


def test_native_group_by_an_array_dimension(env: Any) -> None:
    out = run_native_query(env.service, {
        "queryType": "groupBy", "dataSource": "arr", "intervals": ["2024-01-01/2024-01-02"], "granularity": "all",
        "dimensions": [{"type": "default", "dimension": "codes", "outputName": "codes", "outputType": "ARRAY<LONG>"}],
        "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}]})
    got = sorted(((r["event"]["codes"], r["event"]["added"]) for r in out), key=lambda x: x[1])
    assert got == [([1, 2], 3), ([3, None, 4], 4), ([7], 8), (None, 16)]


def test_native_array_filters(env: Any) -> None:
    def pages(flt: dict[str, Any]) -> list[str]:
        out = run_native_query(env.service, {
            "queryType": "scan", "dataSource": "arr", "intervals": ["2024-01-01/2024-01-02"], "columns": ["page"],
            "resultFormat": "compactedList", "filter": flt})
        return sorted(r[0] for batch in out for r in batch["events"])

    assert pages({"type": "arrayContainsElement", "column": "tags", "elementMatchValue": "a"}) == ["A", "B", "E"]
    assert pages({"type": "arrayContainsElement", "column": "codes", "elementMatchValueType": "LONG",
                  "elementMatchValue": "4"}) == ["C"]
    assert pages({"type": "equals", "column": "tags", "matchValueType": "ARRAY<STRING>",
                  "matchValue": ["b", "a"]}) == ["A", "B"]
    assert pages({"type": "equals", "column": "codes", "matchValueType": "ARRAY<LONG>",
                  "matchValue": [3, None, 4]}) == ["C"]  # NULL elements equal each other
    assert pages({"type": "not", "field": {"type": "arrayContainsElement", "column": "tags",
                                           "elementMatchValue": "a"}}) == ["C"]  # D's NULL: unknown
    with pytest.raises(DruidError) as e:
        pages({"type": "arrayContainsElement", "column": "codes", "elementMatchValueType": "LONG",
               "elementMatchValue": "x"})
    assert e.value.status == 400


def test_a_null_element_orders_before_any_value_as_in_druid(env: Any) -> None:
    # [3, NULL, 4] < [3, 0] because the NULL element sorts first (DuckDB alone puts it last)
    assert rows(env, "SELECT page FROM arr WHERE codes < ARRAY[3, 0] GROUP BY page") == [("A",), ("B",), ("C",)]
    assert rows(env, "SELECT page FROM arr WHERE codes >= ARRAY[3, 0] GROUP BY page") == [("D",)]
    # also through the array functions (their type is their array's)
    assert rows(env, "SELECT page FROM arr WHERE ARRAY_APPEND(codes, 9) < ARRAY[3, 0] GROUP BY page") == \
        [("A",), ("B",), ("C",)]
    assert rows(env, "SELECT page FROM arr WHERE codes BETWEEN ARRAY[3] AND ARRAY[3, 0] GROUP BY page") == [("C",)]
    assert rows(env, "SELECT codes, COUNT(*) FROM arr GROUP BY codes ORDER BY codes DESC") == \
        [([7], 1), ([3, None, 4], 1), ([1, 2], 2), (None, 1)]
    assert rows(env, "SELECT page, ROW_NUMBER() OVER (ORDER BY codes DESC, page) FROM arr GROUP BY page, codes") == \
        [("D", 1), ("C", 2), ("A", 3), ("B", 4), ("E", 5)]


def test_a_sought_value_takes_the_arrays_element_type_as_in_druid(env: Any) -> None:
    # Druid 33: ARRAY_CONTAINS(strings, 1) looks for '1', ARRAY_CONTAINS(longs, '1') for 1; but
    # ARRAY_OFFSET_OF / ORDINAL_OF do not convert: '2' is at no position of a LONG array
    got = rows(env, "SELECT page, ARRAY_CONTAINS(codes, '1'), ARRAY_OVERLAP(codes, ARRAY['7', 'x']), "
                    "ARRAY_OFFSET_OF(codes, '2'), ARRAY_CONTAINS(tags, 1), MV_CONTAINS(mv, 1), "
                    "SCALAR_IN_ARRAY('4', codes), ARRAY_OFFSET_OF(codes, 2) FROM arr ORDER BY __time")
    assert got == [("A", True, False, None, False, False, False, 1), ("B", True, False, None, False, False, False, 1),
                   ("C", False, False, None, False, False, True, None), ("D", False, True, None, None, False, False, None),
                   ("E", None, None, None, False, False, None, None)]


def test_a_value_appended_or_prepended_takes_the_arrays_element_type(env: Any) -> None:
    # Druid 33 (QA suite, qaArray ops_funcs_array_funcs / mv_funcs): ARRAY_PREPEND(9, strings) adds '9';
    # MV_APPEND(longs, 'A') adds 'A' read as a LONG: NULL
    got = rows(env, "SELECT ARRAY_TO_STRING(ARRAY_PREPEND(9, codes), ','), ARRAY_TO_STRING(ARRAY_APPEND(codes, '5'), ','), "
                    "ARRAY_LENGTH(MV_APPEND(codes, 'A')), ARRAY_TO_STRING(MV_APPEND(codes, 'A'), ',') FROM arr "
                    "WHERE page = 'A'")
    assert got == [("9,1,2", "1,2,5", 3, "1,2,null")]


def test_earliest_of_an_array_is_the_text_java_writes(env: Any) -> None:
    # Druid 33: EARLIEST(a_int) is the VARCHAR '[1, 2, null]', cut to maxBytes
    assert rows(env, "SELECT EARLIEST(codes), LATEST(scores, 4), EARLIEST_BY(codes, MILLIS_TO_TIMESTAMP(0 - added)) "
                     "FROM arr") == [("[1, 2]", "[2.0", None)]
