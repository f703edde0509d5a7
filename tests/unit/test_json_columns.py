"""Nested JSON columns (``type: json`` dimensions): indexed by the real indexer from JSON text and from
Arrow structs, stored with Parquet's JSON type, served as ``COMPLEX<json>`` and read with Druid's JSON
functions — every answer worked out by hand from the rows below."""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from serving.broker.sql.engine import execute
from serving.broker.sql.result_formats import ResultWriter
from serving.errors import DruidError
from tests.unit.test_sql_execution import run

SCHEMA: dict[str, Any] = {
    "dataSource": "events",
    "timestampSpec": {"column": "ts", "format": "iso"},
    "dimensionsSpec": {"dimensions": ["kind", {"type": "json", "name": "attrs"}]},
    "metricsSpec": [{"type": "count", "name": "count"}],
    "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "hour", "rollup": True},
}

TEXTS = [
    '{"user": {"name": "ann", "age": 31}, "tags": ["a", "b"], "ok": true}',
    '{"user":{"name":"ann","age":31},"tags":["a","b"],"ok":true}',  # the same document: rolls up with it
    '{"user": {"name": "bob"}, "score": 2.5}',
    "plain text",  # not JSON: stored as the JSON string "plain text"
    None,
]


@pytest.fixture
def env(broker_env: Any) -> Any:
    table = pa.table({"ts": ["2024-01-01T00:10:00Z", "2024-01-01T00:20:00Z", "2024-01-01T01:00:00Z",
                             "2024-01-01T02:00:00Z", "2024-01-01T03:00:00Z"],
                      "kind": ["x", "x", "y", "z", "w"], "attrs": TEXTS})
    broker_env.index(table, SCHEMA, version="2024-02-01T00:00:00.000Z")
    # the same shape as a native batch task reads it: an Arrow struct column
    structs = pa.table({"ts": ["2024-01-02T00:00:00Z"], "kind": ["s"],
                        "attrs": pa.array([{"user": {"name": "cy", "age": 5}}])})
    broker_env.index(structs, SCHEMA, version="2024-02-01T00:00:00.000Z")
    broker_env.service.refresh()
    return broker_env


def test_stored_as_parquet_json_and_rolled_up(env: Any) -> None:
    files = sorted(env.settings.home.rglob("data.parquet"))
    assert files and all(str(pq.read_schema(f).field("attrs").type) == "extension<arrow.json>" for f in files)
    _, rows = run(env, 'SELECT kind, SUM("count") FROM events GROUP BY kind ORDER BY kind')
    assert rows == [("s", 1), ("w", 1), ("x", 2), ("y", 1), ("z", 1)]
    _, rows = run(env, "SELECT COUNT(*) FROM events")
    assert rows == [(5,)]  # the two equal documents rolled up into one row


def test_information_schema_and_result_types(env: Any) -> None:
    _, rows = run(env, "SELECT DATA_TYPE, JDBC_TYPE FROM INFORMATION_SCHEMA.COLUMNS "
                       "WHERE TABLE_NAME = 'events' AND COLUMN_NAME = 'attrs'")
    assert rows == [("COMPLEX<json>", 1111)]
    res = execute(env.service, "SELECT kind, attrs FROM events WHERE kind IN ('x', 'z', 'w') ORDER BY __time",
                  metadata=env.metadata)
    try:
        assert [(c.name, c.sql_type, c.native_type) for c in res.columns] == [
            ("kind", "VARCHAR", "STRING"), ("attrs", "OTHER", "COMPLEX<json>")]
        body = ResultWriter("object", res.columns, header=True, types_header=True).write_all(res.batches())
    finally:
        res.close()
    assert orjson.loads(body) == [
        {"kind": {"type": "STRING"}, "attrs": {"type": "COMPLEX<json>"}},
        # a JSON value is answered as its compact JSON text, as Druid 33 answers it
        {"kind": "x", "attrs": '{"user":{"name":"ann","age":31},"tags":["a","b"],"ok":true}'},
        {"kind": "z", "attrs": '"plain text"'},
        {"kind": "w", "attrs": None},
    ]


def test_json_value_query_keys_paths(env: Any) -> None:
    _, rows = run(env, "SELECT kind, JSON_VALUE(attrs, '$.user.name'), JSON_VALUE(attrs, '.user.age' RETURNING BIGINT), "
                       "JSON_VALUE(attrs, '$.tags[1]'), JSON_VALUE(attrs, '$.user'), JSON_VALUE(attrs, '$.score' RETURNING DOUBLE) "
                       "FROM events ORDER BY __time")
    assert rows == [("x", "ann", 31, "b", None, None), ("y", "bob", None, None, None, 2.5),
                    ("z", None, None, None, None, None), ("w", None, None, None, None, None),
                    ("s", "cy", 5, None, None, None)]
    _, rows = run(env, "SELECT JSON_VALUE(attrs, '$.user.name') AS n, SUM(\"count\") FROM events "
                       "WHERE JSON_VALUE(attrs, '$.user.age' RETURNING BIGINT) > 10 GROUP BY 1")
    assert rows == [("ann", 2)]
    _, rows = run(env, "SELECT TO_JSON_STRING(JSON_QUERY(attrs, '$.user')), JSON_KEYS(attrs, '$'), JSON_KEYS(attrs, '$.tags'), "
                       "JSON_PATHS(attrs) FROM events WHERE kind = 'x'")
    # an array's keys are its positions as text, as Druid 33 answers (Druid's QA suite, qaJsonCols)
    assert rows == [('{"name":"ann","age":31}', ["user", "tags", "ok"], ["0", "1"],
                     ["$.user.name", "$.user.age", "$.tags", "$.ok"])]


def test_building_and_parsing_json(env: Any) -> None:
    res = execute(env.service, "SELECT JSON_OBJECT(KEY 'k' VALUE kind, 'n': 1) AS o, PARSE_JSON('[1, {\"a\": 2}]') AS p, "
                               "TRY_PARSE_JSON('nope') AS t FROM events WHERE kind = 'y'", metadata=env.metadata)
    try:
        assert [c.native_type for c in res.columns] == ["COMPLEX<json>"] * 3
        body = ResultWriter("object", res.columns).write_all(res.batches())
    finally:
        res.close()
    assert orjson.loads(body) == [{"o": '{"k":"y","n":1}', "p": '[1,{"a":2}]', "t": None}]  # JSON text, as Druid
    # as Druid 33 writes them: a BOOLEAN as 1/0 and a TIMESTAMP as millis in an object; any value that is not
    # JSON (a string, a number, a TIMESTAMP, NULL) has one path, "$"
    _, rows = run(env, "SELECT TO_JSON_STRING(JSON_OBJECT('b': (kind = 'y'), 't': __time)), JSON_PATHS(kind), "
                       "JSON_PATHS(__time), JSON_PATHS(CAST(NULL AS VARCHAR)) FROM events WHERE kind = 'y'")
    assert rows == [('{"b":1,"t":1704070800000}', ["$"], ["$"], ["$"])]  # 2024-01-01T01:00Z
    with pytest.raises(DruidError) as e:
        run(env, "SELECT PARSE_JSON('{not json') FROM events")
    assert e.value.status == 400
    with pytest.raises(DruidError) as e:
        run(env, "SELECT JSON_VALUE(attrs, kind) FROM events")
    assert e.value.status == 400 and "literal" in str(e.value)


def test_compaction_keeps_json_columns(env: Any) -> None:
    from radstack.storage.compaction import CompactionConfig, compact_datasource
    from radstack.time.intervals import parse_instant

    cfg = CompactionConfig.from_json({"dataSource": "events", "metricsSpec": [{"type": "longSum", "name": "count",
                                                                              "fieldName": "count"}],
                                      "tiers": [{"olderThan": "P1D", "queryGranularity": "DAY", "segmentGranularity": "DAY"}],
                                      "skipOffsetFromLatest": "PT0S"})
    _, results, errors = compact_datasource(env.metadata, env.deep_storage, cfg, settings=env.settings,
                                            now_ms=parse_instant("2024-02-01T00:00:00Z"))
    assert not errors and results
    env.service.refresh()
    _, rows = run(env, "SELECT kind, JSON_VALUE(attrs, '$.user.name'), SUM(\"count\") FROM events GROUP BY 1, 2 ORDER BY 1")
    assert rows == [("s", "cy", 1), ("w", None, 1), ("x", "ann", 2), ("y", "bob", 1), ("z", None, 1)]
    _, rows = run(env, "SELECT DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'events' AND COLUMN_NAME = 'attrs'")
    assert rows == [("COMPLEX<json>",)]


def test_native_scan_returns_nested_values_and_segment_metadata_the_type(env: Any) -> None:
    from serving.broker.native import run_native_query

    out = run_native_query(env.service, {"queryType": "scan", "dataSource": "events", "intervals": ["2024-01-01/2024-01-03"],
                                         "columns": ["kind", "attrs"], "order": "ascending", "limit": 2})
    events = [e for part in out for e in part["events"]]
    assert events == [{"kind": "x", "attrs": {"user": {"name": "ann", "age": 31}, "tags": ["a", "b"], "ok": True}},
                      {"kind": "y", "attrs": {"user": {"name": "bob"}, "score": 2.5}}]
    meta = run_native_query(env.service, {"queryType": "segmentMetadata", "dataSource": "events",
                                          "intervals": ["2024-01-01/2024-01-03"], "merge": True})
    attrs = meta[0]["columns"]["attrs"]
    assert (attrs["typeSignature"], attrs["type"]) == ("COMPLEX<json>", "json")  # as Druid 33 names them


def test_json_functions_read_plain_columns_as_json_scalars_and_compare_numbers() -> None:
    # Druid: JSON_VALUE of a VARCHAR column reads the string as a JSON string (not parsed), and a
    # JSON_VALUE compared with a number compares numbers, a JSON boolean being 1/0
    from serving.broker.sql import Catalog, ColumnInfo, translate

    catalog = Catalog({"t": [ColumnInfo("__time", "LONG", "time"), ColumnInfo("s", "STRING", "dimension"),
                             ColumnInfo("doc", "COMPLEX<json>", "dimension")]})
    sql = translate("SELECT JSON_VALUE(s, '$.'), JSON_QUERY(s, '$') FROM t WHERE JSON_VALUE(doc, '$.b') = 1",
                    catalog).sql
    assert 'TO_JSON("t"."s")' in sql and "WHEN LOWER(" in sql and "'true' THEN 1" in sql


def test_json_query_array_of_a_json_null_is_null(env: Any) -> None:
    """Druid 33 (the differential corpus): ``JSON_QUERY_ARRAY`` of a JSON null — ``{"k": null}`` — is NULL,
    not a one-element array."""
    _, rows = run(env, "SELECT kind, ARRAY_LENGTH(JSON_QUERY_ARRAY(JSON_OBJECT(KEY 'k' VALUE CASE WHEN kind = 'x' "
                    "THEN NULL ELSE kind END), '$.k')) AS n FROM events WHERE kind IN ('x', 'y') GROUP BY 1, 2")
    assert sorted(tuple(r) for r in rows) == [("x", None), ("y", 1)]
