"""Druid filters → SQL: golden SQL for a few shapes, and the rows each filter matches in DuckDB."""

from __future__ import annotations

import duckdb
import pytest
import sqlglot

from radstack.filters import FilterError, extraction_to_sql, filter_columns, filter_to_sql

TYPES = {"dim": "STRING", "num": "LONG", "dbl": "DOUBLE", "other": "STRING"}

# id, __time (millis), dim, num, dbl, other
ROWS = [
    (1, 1_000_000_000_123, "apple", 1, 1.5, "apple"),
    (2, 1_000_003_600_000, "Banana", 10, 2.0, "banana"),
    (3, 1_000_086_400_000, None, None, None, None),
    (4, 1_000_172_800_000, "cherry10", 2, -3.5, "x"),
    (5, 1_000_259_200_000, "cherry9", 20, 0.0, None),
    (6, 1_000_345_600_000, "it's 50%_off", 300, 10.25, "it's 50%_off"),
    (7, 1_000_432_000_000, "", 0, None, ""),
]


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    c.execute('CREATE TABLE t (id INTEGER, __time TIMESTAMP, dim VARCHAR, num BIGINT, dbl DOUBLE, other VARCHAR)')
    for r in ROWS:
        c.execute("INSERT INTO t VALUES (?, epoch_ms(?::BIGINT), ?, ?, ?, ?)", list(r))
    return c


def matched(con: duckdb.DuckDBPyConnection, f: dict, types: dict | None = None) -> list[int]:
    sql = filter_to_sql(f, column_types=TYPES if types is None else types)
    return [r[0] for r in con.execute(f"SELECT id FROM t WHERE {sql} ORDER BY id").fetchall()]


GOLDEN = [
    ({"type": "selector", "dimension": "dim", "value": "apple"}, "(\"dim\" = 'apple')"),
    ({"type": "selector", "dimension": "dim", "value": None}, '("dim" IS NULL)'),
    ({"type": "selector", "dimension": "num", "value": "10"}, '("num" = 10)'),
    ({"type": "not", "field": {"type": "selector", "dimension": "dim", "value": "a'b"}}, "(NOT (\"dim\" = 'a''b'))"),
    ({"type": "in", "dimension": "dim", "values": ["b", None, "a"]}, "((\"dim\" IN ('a', 'b')) OR (\"dim\" IS NULL))"),
    (
        {"type": "bound", "dimension": "num", "lower": "1", "upper": "10", "upperStrict": True, "ordering": "numeric"},
        '(("num" >= 1) AND ("num" < 10))',
    ),
    ({"type": "interval", "dimension": "__time", "intervals": ["2001-09-09/2001-09-10"]},
     '(epoch_ms("__time") >= 999993600000 AND epoch_ms("__time") < 1000080000000)'),
    ({"type": "like", "dimension": "dim", "pattern": "a\\%%", "escape": "\\"}, "(\"dim\" LIKE 'a\\%%' ESCAPE '\\')"),
    ({"type": "and", "fields": [{"type": "true"}, {"type": "null", "column": "x\"y"}]}, '(TRUE AND ("x""y" IS NULL))'),
]


@pytest.mark.parametrize(("f", "sql"), GOLDEN)
def test_golden_sql(f: dict, sql: str) -> None:
    assert filter_to_sql(f, column_types=TYPES) == sql


CASES = [
    ({"type": "selector", "dimension": "dim", "value": "apple"}, [1]),
    ({"type": "selector", "dimension": "dim", "value": None}, [3]),
    ({"type": "selector", "dimension": "dim", "value": ""}, [7]),
    ({"type": "not", "field": {"type": "selector", "dimension": "dim", "value": "apple"}}, [2, 4, 5, 6, 7]),
    ({"type": "not", "field": {"type": "selector", "dimension": "dim", "value": None}}, [1, 2, 4, 5, 6, 7]),
    ({"type": "selector", "dimension": "num", "value": "10"}, [2]),
    ({"type": "selector", "dimension": "num", "value": "10.0"}, [2]),
    ({"type": "selector", "dimension": "num", "value": "abc"}, []),
    ({"type": "not", "field": {"type": "selector", "dimension": "num", "value": "abc"}}, [1, 2, 4, 5, 6, 7]),
    ({"type": "selector", "dimension": "dbl", "value": "2"}, [2]),
    ({"type": "equals", "column": "dim", "matchValueType": "STRING", "matchValue": "Banana"}, [2]),
    ({"type": "equals", "column": "num", "matchValueType": "LONG", "matchValue": 20}, [5]),
    ({"type": "equals", "column": "dbl", "matchValueType": "DOUBLE", "matchValue": 10.25}, [6]),
    ({"type": "range", "column": "num", "matchValueType": "LONG", "lower": 2, "upper": 20, "upperOpen": True}, [2, 4]),
    ({"type": "range", "column": "dim", "matchValueType": "STRING", "lower": "a", "lowerOpen": True}, [1, 4, 5, 6]),
    ({"type": "range", "column": "dbl", "matchValueType": "DOUBLE", "upper": 0}, [4, 5]),
    ({"type": "in", "dimension": "dim", "values": ["apple", "cherry9", "nope"]}, [1, 5]),
    ({"type": "in", "dimension": "dim", "values": ["apple", None]}, [1, 3]),
    ({"type": "in", "dimension": "num", "values": ["1", "300", "x"]}, [1, 6]),
    ({"type": "in", "dimension": "dim", "values": []}, []),
    ({"type": "not", "field": {"type": "in", "dimension": "dim", "values": []}}, [1, 2, 4, 5, 6, 7]),
    ({"type": "not", "field": {"type": "in", "dimension": "dim", "values": ["apple"]}}, [2, 4, 5, 6, 7]),
    ({"type": "bound", "dimension": "dim", "lower": "b", "upper": "cherry2"}, [4]),
    ({"type": "bound", "dimension": "dim", "lower": "B", "lowerStrict": True, "upper": "cherry10", "upperStrict": True}, [1, 2]),
    ({"type": "bound", "dimension": "num", "lower": "2", "upper": "20", "ordering": "numeric"}, [2, 4, 5]),
    ({"type": "bound", "dimension": "num", "lower": "2", "upper": "20", "ordering": "lexicographic"}, [4, 5]),
    ({"type": "bound", "dimension": "dim", "lower": "cherry9", "ordering": "alphanumeric"}, [4, 5, 6]),
    ({"type": "bound", "dimension": "dim", "upper": "cherry9", "upperStrict": True, "ordering": "alphanumeric"}, [1, 2, 7]),
    ({"type": "bound", "dimension": "dim", "lower": "cherry10", "ordering": "lexicographic"}, [4, 5, 6]),
    ({"type": "bound", "dimension": "dim", "lower": "aaaaa", "upper": "aaaaaa", "ordering": "strlen"}, [1, 2]),
    ({"type": "bound", "dimension": "dim", "upper": "aaaaa", "upperStrict": True, "ordering": "strlen"}, [7]),
    ({"type": "bound", "dimension": "__time", "lower": "1000086400000", "upper": "1000259200000", "upperStrict": True,
      "ordering": "numeric"}, [3, 4]),
    ({"type": "and", "fields": [{"type": "selector", "dimension": "dim", "value": "apple"},
                                {"type": "selector", "dimension": "num", "value": "1"}]}, [1]),
    ({"type": "or", "fields": [{"type": "selector", "dimension": "dim", "value": "apple"},
                               {"type": "selector", "dimension": "num", "value": "20"}]}, [1, 5]),
    ({"type": "not", "field": {"type": "or", "fields": [{"type": "selector", "dimension": "dim", "value": "apple"},
                                                         {"type": "selector", "dimension": "dbl", "value": "0"}]}},
     [2, 4, 6]),  # row 7: false OR unknown = unknown, so NOT does not match it either
    ({"type": "and", "fields": []}, [1, 2, 3, 4, 5, 6, 7]),
    ({"type": "regex", "dimension": "dim", "pattern": "^cherry\\d$"}, [5]),
    ({"type": "regex", "dimension": "dim", "pattern": "an"}, [2]),
    ({"type": "not", "field": {"type": "regex", "dimension": "dim", "pattern": "an"}}, [1, 4, 5, 6, 7]),
    ({"type": "like", "dimension": "dim", "pattern": "cherry_"}, [5]),
    ({"type": "like", "dimension": "dim", "pattern": "%50\\%\\_%", "escape": "\\"}, [6]),
    ({"type": "like", "dimension": "dim", "pattern": "%50%_%"}, [6]),
    ({"type": "interval", "dimension": "__time", "intervals": ["2001-09-09T00:00:00Z/2001-09-10T00:00:00Z"]}, [1, 2]),
    ({"type": "interval", "dimension": "__time",
      "intervals": ["2001-09-10T01:46:40Z/PT1S", "2001-09-12/2001-09-13T01:46:40Z"]}, [3, 5]),
    ({"type": "search", "dimension": "dim", "query": {"type": "insensitive_contains", "value": "AN"}}, [2]),
    ({"type": "search", "dimension": "dim", "query": {"type": "contains", "value": "B", "caseSensitive": True}}, [2]),
    ({"type": "search", "dimension": "dim", "query": {"type": "contains", "value": "b"}}, [2]),
    ({"type": "search", "dimension": "dim", "query": {"type": "contains", "value": "%"}}, [6]),
    ({"type": "search", "dimension": "dim", "query": {"type": "fragment", "values": ["ch", "10"]}}, [4]),
    ({"type": "columnComparison", "dimensions": ["dim", "other"]}, [1, 3, 6, 7]),
    ({"type": "columnComparison", "dimensions": [
        {"type": "extraction", "dimension": "dim", "outputName": "a", "extractionFn": {"type": "lower"}}, "other"]},
     [1, 2, 3, 6, 7]),
    ({"type": "expression", "expression": "num > 5 && strlen(dim) < 10"}, [2, 5]),
    ({"type": "expression", "expression": "nvl(dim, 'x') == 'x'"}, [3]),
    ({"type": "true"}, [1, 2, 3, 4, 5, 6, 7]),
    ({"type": "false"}, []),
    ({"type": "null", "column": "dbl"}, [3, 7]),
    ({"type": "not", "field": {"type": "null", "column": "dbl"}}, [1, 2, 4, 5, 6]),
    # extraction functions
    ({"type": "selector", "dimension": "dim", "value": "che",
      "extractionFn": {"type": "substring", "index": 0, "length": 3}}, [4, 5]),
    ({"type": "selector", "dimension": "dim", "value": None,
      "extractionFn": {"type": "substring", "index": 5}}, [1, 3, 7]),
    ({"type": "selector", "dimension": "dim", "value": "5", "extractionFn": {"type": "strlen"}}, [1]),
    ({"type": "in", "dimension": "dim", "values": ["APPLE", "BANANA"], "extractionFn": {"type": "upper"}}, [1, 2]),
    ({"type": "selector", "dimension": "dim", "value": "banana", "extractionFn": {"type": "lower"}}, [2]),
    ({"type": "selector", "dimension": "dim", "value": "10",
      "extractionFn": {"type": "regex", "expr": "cherry(\\d+)", "index": 1}}, [4]),
    ({"type": "selector", "dimension": "dim", "value": "apple",
      "extractionFn": {"type": "regex", "expr": "cherry(\\d+)", "index": 1}}, [1]),
    ({"type": "selector", "dimension": "dim", "value": "none",
      "extractionFn": {"type": "regex", "expr": "cherry(\\d+)", "replaceMissingValue": True,
                       "replaceMissingValueWith": "none"}}, [1, 2, 3, 6, 7]),
    ({"type": "selector", "dimension": "__time", "value": "2001-09-09",
      "extractionFn": {"type": "timeFormat", "format": "yyyy-MM-dd"}}, [1, 2]),
    ({"type": "selector", "dimension": "__time", "value": "2001-09-08",
      "extractionFn": {"type": "timeFormat", "format": "yyyy-MM-dd", "timeZone": "America/Los_Angeles"}}, [1, 2]),
    ({"type": "in", "dimension": "__time", "values": ["2001-09-10T00:00:00.000Z", "2001-09-09T00:00:00.000Z"],
      "extractionFn": {"type": "timeFormat", "granularity": "day"}}, [1, 2, 3]),
    ({"type": "bound", "dimension": "__time", "lower": "Tuesday",
      "extractionFn": {"type": "timeFormat", "format": "EEEE"}}, [4, 5]),
    ({"type": "selector", "dimension": "__time", "value": "2001-09-01",
      "extractionFn": {"type": "timeFormat", "format": "yyyy-MM-dd",
                       "granularity": {"type": "period", "period": "P1M", "timeZone": "UTC"}}}, [1, 2, 3, 4, 5, 6, 7]),
    ({"type": "selector", "dimension": "dim", "value": "CHE", "extractionFn": {"type": "cascade", "extractionFns": [
        {"type": "substring", "index": 0, "length": 3}, {"type": "upper"}]}}, [4, 5]),
]


@pytest.mark.parametrize(("f", "ids"), CASES, ids=[str(i) for i in range(len(CASES))])
def test_rows_matched(con: duckdb.DuckDBPyConnection, f: dict, ids: list[int]) -> None:
    assert matched(con, f) == ids, filter_to_sql(f, column_types=TYPES)


@pytest.mark.parametrize(("f", "ids"), CASES, ids=[str(i) for i in range(len(CASES))])
def test_spark_sql_parses(f: dict, ids: list[int]) -> None:
    sql = filter_to_sql(f, dialect="spark", column_types=TYPES)
    assert sqlglot.parse_one(sql, read="spark") is not None


def test_time_stored_as_long(con: duckdb.DuckDBPyConnection) -> None:
    c = duckdb.connect()
    c.execute("CREATE TABLE t AS SELECT * FROM (VALUES (1, 5::BIGINT), (2, 15::BIGINT)) v(id, __time)")
    sql = filter_to_sql({"type": "bound", "dimension": "__time", "lower": "10", "ordering": "numeric"},
                        column_types={"__time": "LONG"})
    assert sql == '("__time" >= 10)'
    assert [r[0] for r in c.execute(f"SELECT id FROM t WHERE {sql}").fetchall()] == [2]


def test_injection_is_impossible(con: duckdb.DuckDBPyConnection) -> None:
    evil = "x' OR '1'='1"
    assert matched(con, {"type": "selector", "dimension": "dim", "value": evil}) == []
    assert matched(con, {"type": "in", "dimension": "dim", "values": [evil, "apple"]}) == [1]
    assert matched(con, {"type": "like", "dimension": "dim", "pattern": "%' OR 1=1 --"}) == []
    assert matched(con, {"type": "selector", "dimension": "dim", "value": "it's 50%_off"}) == [6]
    spark = filter_to_sql({"type": "selector", "dimension": "d`x", "value": "a\\' OR 1=1 --"}, dialect="spark")
    assert spark == "(`d``x` = 'a\\\\\\' OR 1=1 --')"
    # an identifier with a quote is one identifier, not SQL
    with pytest.raises(duckdb.Error, match="dim\" OR \"1"):
        matched(con, {"type": "selector", "dimension": 'dim" OR "1', "value": "a"})
    assert con.execute("SELECT count(*) FROM t").fetchone() == (7,)


@pytest.mark.parametrize(
    ("f", "field"),
    [
        ({"type": "selector", "dimension": "dim", "value": "x", "extractionFn": {"type": "javascript"}},
         "extractionFn.type"),
        ({"type": "nope"}, "filter.type"),
        ({"type": "and", "fields": [{"type": "bogus"}]}, "filter.fields[0].type"),
        ({"type": "not"}, "filter.field"),
        ({"type": "equals", "column": "dim", "matchValueType": "STRING"}, "filter.matchValue"),
        ({"type": "interval", "intervals": ["garbage"]}, "filter.intervals[0]"),
        ({"type": "bound", "dimension": "num", "lower": "abc", "ordering": "numeric"}, "filter.lower"),
        ({"type": "selector", "dimension": "__time", "value": "x",
          "extractionFn": {"type": "timeFormat", "granularity": "fortnight"}}, "extractionFn.granularity"),
        ({"type": "expression", "expression": "nosuchfn(x)"}, "filter.expression"),
        ({"type": "like", "dimension": "dim", "pattern": "a", "escape": "ab"}, "filter.escape"),
    ],
)
def test_errors_name_the_field(f: dict, field: str) -> None:
    with pytest.raises(FilterError) as e:
        filter_to_sql(f, column_types=TYPES)
    assert e.value.field == field


def test_none_filter_and_columns() -> None:
    assert filter_to_sql(None) == "TRUE"
    f = {"type": "and", "fields": [
        {"type": "selector", "dimension": "a", "value": "1"},
        {"type": "not", "field": {"type": "expression", "expression": "b + c > 1"}},
        {"type": "interval", "intervals": ["2000/2001"]},
        {"type": "columnComparison", "dimensions": ["d", {"dimension": "e"}]},
    ]}
    assert filter_columns(f) == {"a", "b", "c", "__time", "d", "e"}


def test_extraction_to_sql(con: duckdb.DuckDBPyConnection) -> None:
    sql = extraction_to_sql({"type": "timeFormat", "format": "yyyy-MM-dd HH", "timeZone": "Asia/Kolkata"}, "__time")
    rows = con.execute(f"SELECT {sql} FROM t WHERE id IN (1, 2) ORDER BY id").fetchall()
    assert rows == [("2001-09-09 07",), ("2001-09-09 08",)]
