"""``EXPLAIN PLAN FOR``: Druid's PLAN / RESOURCES / ATTRIBUTES row, describing the DuckDB statement the
broker would run (with its signature), on the real broker over the ``wiki`` dataset."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from serving.broker.sql.explain import explained_statement
from serving.errors import DruidError
from tests.unit.test_sql_execution import run


@pytest.mark.parametrize("sql,inner", [
    ("EXPLAIN PLAN FOR SELECT 1", "SELECT 1"),
    ("  explain plan for\nSELECT page FROM wiki", "SELECT page FROM wiki"),
    ("-- why slow?\n/* dashboard 3 */ EXPLAIN PLAN WITH IMPLEMENTATION AS JSON FOR SELECT 2", "SELECT 2"),
    ("EXPLAIN PLAN EXCLUDING ATTRIBUTES FOR SELECT 3", "SELECT 3"),
    ("SELECT 'EXPLAIN PLAN FOR'", None),
    ("EXPLAIN SELECT 1", None),
])
def test_explained_statement(sql: str, inner: str | None) -> None:
    assert explained_statement(sql) == inner


def test_explain_describes_the_statement_without_running_it(wiki: Any) -> None:
    names, rows = run(wiki, "EXPLAIN PLAN FOR SELECT page, SUM(added) AS a, COUNT(*) FROM wiki "
                            "WHERE country = 'US' GROUP BY page ORDER BY a DESC LIMIT 2",
                      context={"sqlQueryId": "q1"})
    assert names == ["PLAN", "RESOURCES", "ATTRIBUTES"] and len(rows) == 1
    plan, resources, attributes = (orjson.loads(x) for x in rows[0])
    (entry,) = plan
    q = entry["query"]
    assert (q["queryType"], q["engine"], q["dataSource"]) == ("sql", "duckdb", {"type": "table", "name": "wiki"})
    assert q["context"] == {"sqlQueryId": "q1"} and '"wiki"' in q["query"] and "LIMIT 2" in q["query"]
    assert entry["signature"] == [{"name": "page", "type": "STRING"}, {"name": "a", "type": "LONG"},
                                  {"name": "EXPR$2", "type": "LONG"}]
    assert entry["columnMappings"][2] == {"queryColumn": "EXPR$2", "outputColumn": "EXPR$2"}
    assert resources == [{"name": "wiki", "type": "DATASOURCE"}]
    assert attributes == {"statementType": "SELECT"}


def test_explain_lists_system_tables_and_refuses_what_the_query_would(wiki: Any) -> None:
    _, rows = run(wiki, "EXPLAIN PLAN FOR SELECT COUNT(*) FROM sys.segments")
    assert orjson.loads(rows[0][1]) == [{"name": "segments", "type": "SYSTEM_TABLE"}]
    for bad in ("EXPLAIN PLAN FOR SELECT * FROM nosuch", "EXPLAIN PLAN FOR DELETE FROM wiki",
                "EXPLAIN PLAN FOR SELECT * FROM read_csv('/etc/passwd')"):
        with pytest.raises(DruidError) as e:
            run(wiki, bad)
        assert e.value.status == 400
