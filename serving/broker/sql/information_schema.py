"""INFORMATION_SCHEMA.SCHEMATA / TABLES / COLUMNS with Druid's columns and values.

As in Druid, every COLUMNS field is VARCHAR except JDBC_TYPE (BIGINT); ORDINAL_POSITION is the
0-based field index; COLUMN_DEFAULT is ''; IS_NULLABLE is 'NO' only for ``__time``."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from radstack.druid_types import jdbc_type
from serving.broker.sql import sys_tables
from serving.broker.sql.catalog import LOOKUP_COLUMNS, SCHEMAS, SYSTEM_TABLES, Catalog

S = pa.string()
SCHEMATA = pa.schema([(n, S) for n in (
    "CATALOG_NAME", "SCHEMA_NAME", "SCHEMA_OWNER", "DEFAULT_CHARACTER_SET_CATALOG",
    "DEFAULT_CHARACTER_SET_SCHEMA", "DEFAULT_CHARACTER_SET_NAME", "SQL_PATH")])
TABLES = pa.schema([(n, S) for n in (
    "TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "TABLE_TYPE", "IS_JOINABLE", "IS_BROADCAST")])
COLUMNS = pa.schema([(n, S) for n in (
    "TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "COLUMN_NAME", "ORDINAL_POSITION", "COLUMN_DEFAULT",
    "IS_NULLABLE", "DATA_TYPE", "CHARACTER_MAXIMUM_LENGTH", "CHARACTER_OCTET_LENGTH",
    "NUMERIC_PRECISION", "NUMERIC_PRECISION_RADIX", "NUMERIC_SCALE", "DATETIME_PRECISION",
    "CHARACTER_SET_NAME", "COLLATION_NAME")] + [("JDBC_TYPE", pa.int64())])

SCHEMAS_BY_TABLE: dict[str, pa.Schema] = {"SCHEMATA": SCHEMATA, "TABLES": TABLES, "COLUMNS": COLUMNS}

_PRECISION = {"TINYINT": 3, "SMALLINT": 5, "INTEGER": 10, "BIGINT": 19, "FLOAT": 15, "REAL": 7, "DOUBLE": 15}
_INTEGERS = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT"}
CATALOG = "druid"


def _sql_type_of_arrow_field(t: pa.DataType) -> str:
    return "BIGINT" if pa.types.is_integer(t) else "VARCHAR"


def system_columns() -> list[tuple[str, str, list[tuple[str, str]]]]:
    """(schema, table, [(column, sql type)]) for every system table."""
    out = []
    for (schema, table) in SYSTEM_TABLES:
        arrow = SCHEMAS_BY_TABLE[table] if schema == "INFORMATION_SCHEMA" else sys_tables.SCHEMAS[table]
        out.append((schema, table, [(f.name, _sql_type_of_arrow_field(f.type)) for f in arrow]))
    return out


def _column_row(schema: str, table: str, name: str, pos: int, sql_type: str, nullable: bool) -> dict[str, Any]:
    numeric = sql_type in _PRECISION
    return {
        "TABLE_CATALOG": CATALOG, "TABLE_SCHEMA": schema, "TABLE_NAME": table, "COLUMN_NAME": name,
        "ORDINAL_POSITION": str(pos), "COLUMN_DEFAULT": "", "IS_NULLABLE": "YES" if nullable else "NO",
        "DATA_TYPE": sql_type, "CHARACTER_MAXIMUM_LENGTH": None, "CHARACTER_OCTET_LENGTH": None,
        "NUMERIC_PRECISION": str(_PRECISION[sql_type]) if numeric else None,
        "NUMERIC_PRECISION_RADIX": "10" if numeric else None,
        "NUMERIC_SCALE": ("0" if sql_type in _INTEGERS else str(-(2**31))) if numeric else None,
        "DATETIME_PRECISION": "3" if sql_type in ("TIMESTAMP", "DATE") else None,
        "CHARACTER_SET_NAME": "UTF-16LE" if sql_type == "VARCHAR" else None,
        "COLLATION_NAME": "UTF-16LE$en_US$primary" if sql_type == "VARCHAR" else None,
        "JDBC_TYPE": jdbc_type(sql_type),
    }


def schemata_table() -> pa.Table:
    rows = [{"CATALOG_NAME": CATALOG, "SCHEMA_NAME": s} for s in SCHEMAS]
    return pa.Table.from_pylist(rows, schema=SCHEMATA)


def tables_table(catalog: Catalog) -> pa.Table:
    rows = [{"TABLE_CATALOG": CATALOG, "TABLE_SCHEMA": "druid", "TABLE_NAME": ds, "TABLE_TYPE": "TABLE",
             "IS_JOINABLE": "NO", "IS_BROADCAST": "NO"} for ds in sorted(catalog.datasources)]
    rows += [{"TABLE_CATALOG": CATALOG, "TABLE_SCHEMA": "lookup", "TABLE_NAME": name, "TABLE_TYPE": "TABLE",
              "IS_JOINABLE": "YES", "IS_BROADCAST": "YES"} for name in sorted(catalog.lookups)]
    for schema, table in SYSTEM_TABLES:
        rows.append({"TABLE_CATALOG": CATALOG, "TABLE_SCHEMA": schema, "TABLE_NAME": table,
                     "TABLE_TYPE": "SYSTEM_TABLE", "IS_JOINABLE": "NO", "IS_BROADCAST": "NO"})
    return pa.Table.from_pylist(rows, schema=TABLES)


def columns_table(catalog: Catalog) -> pa.Table:
    rows = []
    for ds in sorted(catalog.datasources):
        for i, col in enumerate(catalog.datasources[ds]):
            rows.append(_column_row("druid", ds, col.name, i, col.information_type, col.name != "__time"))
    for name in sorted(catalog.lookups):
        for i, (col, sql_type) in enumerate(LOOKUP_COLUMNS):
            rows.append(_column_row("lookup", name, col, i, sql_type, True))
    for schema, table, cols in system_columns():
        for i, (name, sql_type) in enumerate(cols):
            rows.append(_column_row(schema, table, name, i, sql_type, True))
    return pa.Table.from_pylist(rows, schema=COLUMNS)
