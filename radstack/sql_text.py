"""SQL text for the two dialects radstack renders: ``duckdb`` (the broker and the indexer) and ``spark``
(the streaming and batch jobs, on a Spark session whose ``spark.sql.session.timeZone`` is ``UTC``).

The one quoting rule for identifiers and string literals lives here, with the few operators whose
spelling differs between the dialects; everything that renders SQL from a user's value goes through
:func:`quote_identifier` and :func:`string_literal`.
"""

from __future__ import annotations

from collections.abc import Sequence

DIALECTS = ("duckdb", "spark")


class ExpressionError(ValueError):
    """An expression that cannot be parsed or compiled (the message names the culprit)."""


def check_dialect(dialect: str) -> str:
    d = dialect.lower()
    if d not in DIALECTS:
        raise ExpressionError(f"unknown SQL dialect {dialect!r} (expected one of {', '.join(DIALECTS)})")
    return d


def quote_identifier(name: str, dialect: str = "duckdb") -> str:
    """A column name as a quoted SQL identifier (``"a""b"`` in DuckDB, ```a``b``` in Spark)."""
    if check_dialect(dialect) == "spark":
        return "`" + name.replace("`", "``") + "`"
    return '"' + name.replace('"', '""') + '"'


def string_literal(value: str, dialect: str = "duckdb") -> str:
    """A SQL string literal that reads back exactly ``value`` (no injection possible)."""
    if "\0" in value:
        raise ExpressionError("NUL characters are not allowed in string literals")
    if check_dialect(dialect) == "spark":
        # Spark processes backslash escapes inside literals and concatenates adjacent literals.
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return "'" + value.replace("'", "''") + "'"


def int_div(a: str, b: str, dialect: str) -> str:
    return f"({a} div {b})" if dialect == "spark" else f"({a} // {b})"


def string_type(dialect: str) -> str:
    return "STRING" if dialect == "spark" else "VARCHAR"


def concat_sql(parts: Sequence[str], dialect: str) -> str:
    if len(parts) == 1:
        return parts[0]
    if dialect == "spark":
        return "concat(" + ", ".join(parts) + ")"
    return "(" + " || ".join(parts) + ")"
