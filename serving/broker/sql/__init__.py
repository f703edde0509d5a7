"""Druid SQL on the broker: Druid SQL → DuckDB SQL with sqlglot, system tables, result formats.

``translate(sql, catalog, ...)`` turns one read-only Druid SQL statement into DuckDB SQL (one rewrite
rule per module under :mod:`serving.broker.sql.rules`); :mod:`.engine` runs it on a DuckDB cursor of the
broker and yields typed rows; :mod:`.result_formats` writes them the way Druid's ``/druid/v2/sql`` does.
"""

from serving.broker.sql.catalog import Catalog, ColumnInfo
from serving.broker.sql.translate import Translation, translate  # noqa: E402

__all__ = ["Catalog", "ColumnInfo", "Translation", "translate"]
