"""Read-only enforcement on the parsed statement: only queries, never DDL/DML/commands/files.

Checked at the AST level before anything is executed: exactly one statement; its root is a SELECT or a
set operation of SELECTs; no node anywhere is a data-changing, session or command node; every table
reference is a plain name (table functions such as ``EXTERN`` or ``read_csv`` are refused).
"""

from __future__ import annotations

from sqlglot import exp

from serving.broker.sql.errors import read_only, unsupported, validation_error

_DENY_NAMES = (
    "DML", "DDL", "Command", "Pragma", "Set", "Copy", "Use", "Into", "Transaction", "Commit",
    "Rollback", "Describe", "Kill", "LoadData", "Attach", "Detach", "Install", "Refresh", "Cache",
    "Uncache", "Analyze", "Merge", "Insert", "Update", "Delete", "Create", "Drop", "Alter",
    "Parameter", "SessionParameter", "Lateral", "Summarize", "Export", "Grant", "Revoke", "Declare",
)
DENIED: tuple[type[exp.Expression], ...] = tuple(
    getattr(exp, n) for n in _DENY_NAMES if isinstance(getattr(exp, n, None), type)
)
_ROOTS = (exp.Select, exp.SetOperation, exp.Subquery)


def _describe(node: exp.Expression) -> str:
    if isinstance(node, exp.Command):
        return str(node.this).upper()
    if isinstance(node, exp.Into):
        return "SELECT INTO"
    return type(node).__name__.upper()


def check_read_only(statements: list[exp.Expression]) -> exp.Expression:
    """Return the single query statement, or raise Druid's 400 error without executing anything."""
    if not statements:
        raise validation_error("The SQL query is empty")
    if len(statements) > 1:
        raise validation_error("Multiple statements are not supported: send one SQL statement per request")
    stmt = statements[0]
    if not isinstance(stmt, _ROOTS):
        raise read_only(_describe(stmt))
    for node in stmt.walk():
        if isinstance(node, DENIED):
            raise read_only(_describe(node))
        if isinstance(node, exp.Table):
            target = node.this
            if isinstance(target, exp.Func):
                name = str(target.name if isinstance(target, exp.Anonymous) else target.sql_name()).upper()
                inner = target.expressions[0] if isinstance(target, exp.Anonymous) and target.expressions else None
                if name == "EXTERN" or (name == "TABLE" and isinstance(inner, exp.Func) and
                                        str(inner.name).upper() == "EXTERN"):
                    raise read_only("EXTERN (ingestion from external data)")
                if name in ("UNNEST",):
                    raise unsupported("UNNEST is not supported by this broker")
                raise read_only(f"Table function {name}")
            if target is not None and not isinstance(target, exp.Identifier):
                raise read_only(f"Table expression {type(target).__name__}")
    return stmt
