"""SQL text for the two dialects radstack renders: ``duckdb`` (the broker and the indexer) and ``spark``
(the streaming and batch jobs, on a Spark session whose ``spark.sql.session.timeZone`` is ``UTC``).

The one quoting rule for identifiers and string literals lives here, with the few operators whose
spelling differs between the dialects; everything that renders SQL from a user's value goes through
:func:`quote_identifier` and :func:`string_literal`.
"""

from __future__ import annotations

from collections.abc import Sequence

from radstack.user_errors import UserError

DIALECTS = ("duckdb", "spark")


class ExpressionError(ValueError, UserError):
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


# ---- the per-value memory budget: no function builds a value larger than this ----

#: the default of ``server.max_string_bytes``: the largest string or array one function call may build.
#: DuckDB evaluates 2,048 rows at a time, so this bounds one expression's working memory to 2,048 × it
#: per thread (128 MiB at 64 KiB).
DEFAULT_MAX_VALUE_BYTES = 64 * 1024

#: how a value-size check marks its message (DuckDB's ``error()``, Spark's ``raise_error()``) as a resource
#: limit, so the server answers Druid's "Resource limit exceeded" instead of a plain invalid input
RESOURCE_LIMIT_PREFIX = "Resource limit exceeded: "


def byte_length_sql(sql: str, dialect: str) -> str:
    """The UTF-8 bytes of the text ``sql`` (0 for NULL)."""
    fn = "octet_length" if check_dialect(dialect) == "spark" else "strlen"
    return f"coalesce({fn}({sql}), 0)"


def value_limit_message(name: str, limit: int) -> str:
    """What a query past the per-value limit is told (the SQL rule and the native compiler both say it)."""
    return f"{RESOURCE_LIMIT_PREFIX}{name} would build a value larger than {limit:,} bytes (server.max_string_bytes)"


def value_limit_sql(value: str, bound: str, limit: int, name: str, dialect: str) -> str:
    """``value``, or a failure with Druid's resource-limit message when ``bound`` (the largest size the
    arguments allow, in bytes) exceeds ``limit`` — checked before the value is built."""
    message = string_literal(value_limit_message(name, limit), dialect)
    fail = f"raise_error({message})" if check_dialect(dialect) == "spark" else f"error({message})"
    return f"(CASE WHEN CAST({bound} AS BIGINT) > {int(limit)} THEN {fail} ELSE {value} END)"
