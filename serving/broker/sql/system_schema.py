"""Column types of the system tables under the DuckDB names they are registered as (for typing)."""

from __future__ import annotations

from serving.broker.sql.catalog import SYSTEM_TABLES
from serving.broker.sql.information_schema import system_columns

SYSTEM_SCHEMA: dict[str, dict[str, str]] = {
    SYSTEM_TABLES[(schema, table)]: dict(cols) for schema, table, cols in system_columns()
}
