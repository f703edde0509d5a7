"""Lookups in queries, on the real broker over the ``wiki`` dataset (tests/fixtures/broker.py): the
configuration stored as the coordinator API stores it, loaded by the broker's poll, then read through
``LOOKUP()``, the ``lookup`` schema, INFORMATION_SCHEMA and native lookup extractions."""

from __future__ import annotations

import os
from typing import Any

import pytest

from serving.broker.native import run_native_query
from serving.errors import DruidError
from serving.lookups import CONFIG_KEY
from tests.unit.test_sql_execution import run

COUNTRIES = {"US": "United States", "DE": "Germany", "FR": "France", "GB": "United Kingdom"}


def container(version: str, factory: dict[str, Any]) -> dict[str, Any]:
    return {"version": version, "lookupExtractorFactory": factory}


@pytest.fixture
def env(wiki: Any) -> Any:
    wiki.metadata.set_config(CONFIG_KEY, {"__default": {
        "country": container("v1", {"type": "map", "map": COUNTRIES, "injective": True}),
        "page_kind": container("v1", {"type": "map", "map": {"Main": "article", "Talk": "discussion"}}),
    }, "other_tier": {"ignored": container("v1", {"type": "map", "map": {"a": "b"}})}})
    assert wiki.service.refresh() is True
    return wiki


def test_lookup_function_in_group_by(env: Any) -> None:
    _, rows = run(env, "SELECT LOOKUP(country, 'country') AS name, SUM(added) AS a FROM wiki "
                       "GROUP BY 1 ORDER BY 2 DESC")
    assert rows == [("Germany", 27), ("United States", 20), ("France", 8), (None, 1)]


def test_replace_missing_value_and_null_keys(env: Any) -> None:
    _, rows = run(env, "SELECT page, LOOKUP(page, 'page_kind', 'other') AS kind, "
                       "LOOKUP(country, 'country', 'unknown') AS c FROM wiki "
                       "WHERE __time < TIMESTAMP '2024-01-02 00:00:00' ORDER BY __time")
    assert rows == [("Main", "article", "United States"), ("Talk", "discussion", "Germany"),
                    ("Main", "article", "unknown")]


def test_lookup_in_filters_and_a_column_named_k(env: Any) -> None:
    _, rows = run(env, "SELECT COUNT(*) FROM wiki WHERE LOOKUP(country, 'country') = 'Germany'")
    assert rows == [(2,)]
    _, rows = run(env, "SELECT LOOKUP(k, 'country') FROM (SELECT country AS k FROM wiki) t WHERE k = 'FR'")
    assert rows == [("France",)]


def test_lookup_schema_table_and_join(env: Any) -> None:
    names, rows = run(env, "SELECT k, v FROM lookup.country ORDER BY k")
    assert names == ["k", "v"] and rows == sorted(COUNTRIES.items())
    _, rows = run(env, 'SELECT c.v, SUM(w.added) FROM wiki w JOIN lookup.country c ON w.country = c.k '
                       "GROUP BY 1 ORDER BY 1")
    assert rows == [("France", 8), ("Germany", 27), ("United States", 20)]
    _, rows = run(env, 'SELECT COUNT(*) FROM lookup."page_kind"')
    assert rows == [(2,)]


def test_information_schema_lists_the_tier_lookups(env: Any) -> None:
    _, rows = run(env, "SELECT TABLE_NAME, TABLE_TYPE, IS_JOINABLE, IS_BROADCAST FROM INFORMATION_SCHEMA.TABLES "
                       "WHERE TABLE_SCHEMA = 'lookup' ORDER BY 1")
    assert rows == [("country", "TABLE", "YES", "YES"), ("page_kind", "TABLE", "YES", "YES")]
    _, rows = run(env, "SELECT COLUMN_NAME, DATA_TYPE, JDBC_TYPE FROM INFORMATION_SCHEMA.COLUMNS "
                       "WHERE TABLE_SCHEMA = 'lookup' AND TABLE_NAME = 'country' ORDER BY ORDINAL_POSITION")
    assert rows == [("k", "VARCHAR", 12), ("v", "VARCHAR", 12)]


@pytest.mark.parametrize("sql,fragment", [
    ("SELECT LOOKUP(country, 'nosuch') FROM wiki", "Lookup [nosuch] not found"),
    ("SELECT LOOKUP(country, 'ignored') FROM wiki", "Lookup [ignored] not found"),  # another tier
    ("SELECT LOOKUP(country) FROM wiki", "2 or 3 arguments"),
    ("SELECT LOOKUP(country, page) FROM wiki", "string literal"),
    ("SELECT * FROM lookup.nosuch", "Object 'nosuch' not found within 'lookup'"),
])
def test_errors(env: Any, sql: str, fragment: str) -> None:
    with pytest.raises(DruidError) as e:
        run(env, sql)
    assert e.value.status == 400 and fragment in str(e.value)


def test_updates_and_removals_reach_queries(env: Any) -> None:
    config = env.metadata.get_config(CONFIG_KEY)
    config["__default"]["country"] = container("v2", {"type": "map", "map": {"US": "USA"}})
    del config["__default"]["page_kind"]
    env.metadata.set_config(CONFIG_KEY, config)
    assert env.service.refresh() is True
    _, rows = run(env, "SELECT DISTINCT LOOKUP(country, 'country') FROM wiki ORDER BY 1")
    assert rows == [(None,), ("USA",)]  # NULLs first ascending: Druid refuses NULLS LAST
    with pytest.raises(DruidError, match="page_kind"):
        run(env, "SELECT LOOKUP(page, 'page_kind') FROM wiki")
    assert env.service.refresh() is False  # nothing changed since


def test_uri_lookup_reads_allowed_files_and_polls(env: Any) -> None:
    data = env.settings.data_dir
    data.mkdir(parents=True, exist_ok=True)
    (data / "countries.csv").write_text("code,name\nUS,Amerika\nDE,Deutschland\n")
    ns = {"type": "uri", "uri": (data / "countries.csv").as_uri(), "pollPeriod": 1,
          "namespaceParseSpec": {"format": "csv", "hasHeaderRow": True, "keyColumn": "code", "valueColumn": "name"}}
    config = env.metadata.get_config(CONFIG_KEY)
    config["__default"]["file_country"] = container("v1", {"type": "cachedNamespace", "extractionNamespace": ns})
    config["__default"]["outside"] = container("v1", {"type": "cachedNamespace", "extractionNamespace": {
        **ns, "uri": "file:///etc/passwd"}})
    env.metadata.set_config(CONFIG_KEY, config)
    env.service.refresh()
    _, rows = run(env, "SELECT k, v FROM lookup.file_country ORDER BY k")
    assert rows == [("DE", "Deutschland"), ("US", "Amerika")]
    assert "outside" not in env.service.state.lookups
    assert "allowed" in env.service.lookups.errors["outside"]
    (data / "countries.csv").write_text("code,name\nUS,Amerika\nDE,Deutschland\nFR,Frankreich\n")
    os.utime(data / "countries.csv", (1e9 + 10, 2e9))  # a newer modification time
    env.service.refresh()
    _, rows = run(env, "SELECT COUNT(*) FROM lookup.file_country")
    assert rows == [(3,)]


# ---- native -------------------------------------------------------------------------------------


def native(env: Any, **q: Any) -> list[dict[str, Any]]:
    q.setdefault("dataSource", "wiki")
    q.setdefault("intervals", ["2024-01-01/2024-01-03"])
    return run_native_query(env.service, q)


ADDED = {"type": "longSum", "name": "added", "fieldName": "added"}


def test_native_lookup_dimension_spec_and_registered_extraction(env: Any) -> None:
    out = native(env, queryType="groupBy", granularity="all", aggregations=[ADDED],
                 dimensions=[{"type": "lookup", "dimension": "country", "outputName": "name", "name": "country",
                              "replaceMissingValueWith": "?"}])
    assert [(r["event"]["name"], r["event"]["added"]) for r in out] == [
        ("?", 1), ("France", 8), ("Germany", 27), ("United States", 20)]
    out = native(env, queryType="topN", granularity="all", metric="added", threshold=2, aggregations=[ADDED],
                 dimension={"type": "extraction", "dimension": "page", "outputName": "kind",
                            "extractionFn": {"type": "registeredLookup", "lookup": "page_kind",
                                             "retainMissingValue": True}})
    assert out[0]["result"] == [{"kind": "article", "added": 38}, {"kind": "discussion", "added": 15}]


def test_native_unknown_lookup_is_a_bad_request(env: Any) -> None:
    with pytest.raises(DruidError) as e:
        native(env, queryType="groupBy", granularity="all", aggregations=[ADDED],
               dimensions=[{"type": "lookup", "dimension": "country", "name": "nosuch"}])
    assert e.value.status == 400 and "Lookup [nosuch] not found" in str(e.value)


def test_ip_range_lookup_picks_the_narrowest_range(env: Any) -> None:
    config = env.metadata.get_config(CONFIG_KEY)
    config["__default"]["ip_as"] = container("v1", {"type": "ipRange", "ranges": [
        {"cidr": "10.0.0.0/8", "value": "PRIVATE"}, {"cidr": "10.1.0.0/16", "value": "OFFICE"},
        {"start": "192.0.2.10", "end": "192.0.2.20", "value": "TEST-NET"}]})
    env.metadata.set_config(CONFIG_KEY, config)
    env.service.refresh()
    _, rows = run(env, "SELECT LOOKUP('10.1.2.3', 'ip_as'), LOOKUP('10.9.0.1', 'ip_as'), LOOKUP('192.0.2.15', 'ip_as'), "
                       "LOOKUP('192.0.2.21', 'ip_as', 'none'), LOOKUP('not an ip', 'ip_as'), LOOKUP(NULL, 'ip_as')")
    assert rows == [("OFFICE", "PRIVATE", "TEST-NET", "none", None, None)]
    _, rows = run(env, "SELECT k, v FROM lookup.ip_as ORDER BY k")
    assert rows == [("10.0.0.0/8", "PRIVATE"), ("10.1.0.0/16", "OFFICE"), ("192.0.2.10-192.0.2.20", "TEST-NET")]
    out = native(env, queryType="groupBy", granularity="all", aggregations=[ADDED],
                 virtualColumns=[{"type": "expression", "name": "ip", "expression": "'10.1.0.7'", "outputType": "STRING"}],
                 dimensions=[{"type": "lookup", "dimension": "ip", "outputName": "as", "name": "ip_as"}])
    assert [r["event"] for r in out] == [{"as": "OFFICE", "added": 56}]
