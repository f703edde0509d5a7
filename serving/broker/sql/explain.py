"""``EXPLAIN PLAN FOR <query>``: Druid's result shape — one row of ``PLAN``, ``RESOURCES`` and
``ATTRIBUTES``, each a JSON string — describing what this broker would run, without running it.

Druid's ``PLAN`` lists the native queries it would run. This broker runs one DuckDB statement per SQL
query (docs/druid-sql.md), so its plan entry is that statement, under a ``query`` object of type
``"sql"`` with ``"engine": "duckdb"`` — not a Druid native query — together with the datasources and
the aggregate projections it reads, the query context, and Druid's ``signature`` and
``columnMappings`` (the output columns and their native types, found by planning the statement).
"""

from __future__ import annotations

import re
from typing import Any

import orjson
import pyarrow as pa

from serving.broker.sql.result_formats import Column

_EXPLAIN_RE = re.compile(
    r"^\s*(?:(?:--[^\n]*(?:\n|$)|/\*.*?\*/)\s*)*"
    r"EXPLAIN\s+PLAN\s+"
    r"(?:(?:(?:WITH|WITHOUT)\s+IMPLEMENTATION|WITH\s+TYPE|EXCLUDING\s+ATTRIBUTES|INCLUDING\s+(?:ALL\s+)?ATTRIBUTES"
    r"|AS\s+(?:JSON|XML|TEXT|DOT))\s+)*"
    r"FOR\s+",
    re.IGNORECASE | re.DOTALL,
)

COLUMNS = [Column("PLAN", "VARCHAR", "STRING"), Column("RESOURCES", "VARCHAR", "STRING"),
           Column("ATTRIBUTES", "VARCHAR", "STRING")]


def explained_statement(sql: str) -> str | None:
    """The statement an ``EXPLAIN PLAN FOR …`` asks about, or None when ``sql`` is not an EXPLAIN."""
    m = _EXPLAIN_RE.match(sql)
    return sql[m.end():] if m else None


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def explain_table(translation: Any, columns: list[Column], context: dict[str, Any] | None) -> pa.Table:
    """The one-row answer for the query ``translation`` (its output ``columns`` already planned)."""
    data_sources = sorted(translation.datasources)
    query: dict[str, Any] = {
        "queryType": "sql",
        "engine": "duckdb",
        "dataSource": ({"type": "table", "name": data_sources[0]} if len(data_sources) == 1 else
                       {"type": "union", "dataSources": [{"type": "table", "name": d} for d in data_sources]}),
        "query": translation.sql,
    }
    if translation.projections:
        query["projections"] = dict(sorted(translation.projections.items()))
    if translation.lookups:
        query["lookups"] = sorted(translation.lookups)
    if context:
        query["context"] = context
    plan = [{
        "query": query,
        "signature": [{"name": c.name, "type": c.native_type} for c in columns],
        "columnMappings": [{"queryColumn": c.name, "outputColumn": c.name} for c in columns],
    }]
    resources = [{"name": d, "type": "DATASOURCE"} for d in data_sources]
    resources += [{"name": table, "type": "SYSTEM_TABLE"}
                  for schema, table in sorted(translation.system_tables) if schema == "sys"]
    return pa.table({"PLAN": [_json(plan)], "RESOURCES": [_json(resources)],
                     "ATTRIBUTES": [_json({"statementType": "SELECT"})]})
