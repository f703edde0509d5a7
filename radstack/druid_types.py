"""Druid's column types, in one place: what a DuckDB column type (a segment table's, a view's) is as a
Druid native type, and what an Arrow result column is as a Druid SQL type, its native type and its JDBC
code."""

from __future__ import annotations

import pyarrow as pa

#: java.sql.Types codes for Druid SQL type names (what INFORMATION_SCHEMA.COLUMNS.JDBC_TYPE holds).
JDBC_TYPES: dict[str, int] = {
    "TINYINT": -6, "SMALLINT": 5, "INTEGER": 4, "BIGINT": -5, "FLOAT": 6, "REAL": 7, "DOUBLE": 8,
    "DECIMAL": 3, "CHAR": 1, "VARCHAR": 12, "BOOLEAN": 16, "DATE": 91, "TIMESTAMP": 93,
    "ARRAY": 2003, "OTHER": 1111,
}

NATIVE_OF_SQL: dict[str, str] = {
    "TINYINT": "LONG", "SMALLINT": "LONG", "INTEGER": "LONG", "BIGINT": "LONG", "BOOLEAN": "LONG",
    "TIMESTAMP": "LONG", "DATE": "LONG", "FLOAT": "FLOAT", "REAL": "FLOAT", "DOUBLE": "DOUBLE",
    "DECIMAL": "DOUBLE", "CHAR": "STRING", "VARCHAR": "STRING", "OTHER": "COMPLEX<json>",
}

#: Result columns DuckDB types as JSON (nested columns, JSON_QUERY, PARSE_JSON, JSON_OBJECT): Druid's
#: ``COMPLEX<json>``, sent as JSON values, not strings.
JSON_COLUMN = ("OTHER", "COMPLEX<json>")
#: Result columns DuckDB types as a list of JSON (``JSON_QUERY_ARRAY``): an array of JSON values.
JSON_ARRAY = ("ARRAY", "ARRAY<COMPLEX<json>>")


def sql_type_of_arrow(t: pa.DataType) -> str:
    """The Druid SQL type name for an Arrow column type produced by DuckDB."""
    if pa.types.is_timestamp(t):
        return "TIMESTAMP"
    if pa.types.is_date(t):
        return "DATE"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_integer(t):
        return "INTEGER" if t.bit_width <= 32 and pa.types.is_signed_integer(t) else "BIGINT"
    if pa.types.is_decimal(t):  # Calcite types a decimal literal, and arithmetic with one, DECIMAL (a DOUBLE)
        return "BIGINT" if t.scale == 0 else "DECIMAL"
    if pa.types.is_float32(t):
        return "FLOAT"
    if pa.types.is_floating(t):
        return "DOUBLE"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "VARCHAR"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return "ARRAY"
    if pa.types.is_null(t):
        return "VARCHAR"
    return "OTHER"


def native_type(sql_type: str, arrow_type: pa.DataType | None = None) -> str:
    if sql_type == "ARRAY" and arrow_type is not None:
        inner = sql_type_of_arrow(arrow_type.value_type)  # type: ignore[attr-defined]
        return f"ARRAY<{NATIVE_OF_SQL.get(inner, 'STRING')}>"
    return NATIVE_OF_SQL.get(sql_type, "COMPLEX<json>")


def jdbc_type(sql_type: str) -> int:
    return JDBC_TYPES.get(sql_type.upper(), 1111)


#: DuckDB column types as Druid native types (a ``VARCHAR[]`` is a multi-value STRING dimension unless
#: its field is marked ARRAY: :data:`radstack.storage.segment_format.ARRAY_KEY`)
_NATIVE_OF_DUCKDB: dict[str, str] = {
    "VARCHAR": "STRING",
    "JSON": "COMPLEX<json>",  # a ``json`` dimension (Parquet's JSON logical type)
    "BIGINT": "LONG", "INTEGER": "LONG", "SMALLINT": "LONG", "TINYINT": "LONG",
    "UBIGINT": "LONG", "UINTEGER": "LONG", "HUGEINT": "LONG", "BOOLEAN": "LONG", "TIMESTAMP": "LONG",
    "DOUBLE": "DOUBLE", "FLOAT": "FLOAT",
    "BIGINT[]": "ARRAY<LONG>", "DOUBLE[]": "ARRAY<DOUBLE>",
}


def native_type_of_duckdb(duckdb_type: str) -> str:
    """Druid's native type for a DuckDB column type (``DECIMAL``s read as DOUBLE, timestamps as LONG,
    anything else as STRING)."""
    t = duckdb_type.upper()
    if t in _NATIVE_OF_DUCKDB:
        return _NATIVE_OF_DUCKDB[t]
    if t.startswith("DECIMAL"):
        return "DOUBLE"
    if t.startswith("TIMESTAMP"):
        return "LONG"
    return "STRING"
