"""The last check before DuckDB sees a statement: every relation it reads is one radstack put there.

Each table reference of a statement must be a CTE of the statement that is in scope where it is
referenced (scopes from sqlglot's :mod:`sqlglot.optimizer.scope`), or a name on the statement's
allow-list: the datasource views it was authorized to read, their projection views and segment tables,
the registered system tables, lookup tables. Anything else — a path, a glob, a URL, ``duckdb_*``,
``__seg_N`` of another datasource — is Druid's 400 ``Object 'x' not found``, whatever produced it. The SQL
engine (after translation, EXPLAIN and subscriptions included) and the native engine (every statement it
builds from a query's filters, expressions and virtual columns) both run through it."""

from __future__ import annotations

import threading
from collections import OrderedDict

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.scope import Scope, traverse_scope

from serving.errors import invalid_input, object_not_found


def scopes_of(tree: exp.Expression) -> list[Scope]:
    """sqlglot's scopes of ``tree``; a statement they cannot describe is refused (400)."""
    try:
        return traverse_scope(tree)
    except (OptimizeError, RecursionError, ValueError, KeyError) as e:
        raise invalid_input("Cannot resolve the tables of this statement") from e


def cte_references(tree: exp.Expression) -> dict[int, exp.CTE]:
    """For each table reference of ``tree`` that its scope resolves to a CTE, that CTE (keyed by
    ``id`` of the :class:`exp.Table` node). Qualified names (``schema.t``) never name a CTE."""
    refs: dict[int, exp.CTE] = {}
    for scope in scopes_of(tree):
        for table in scope.tables:
            if table.args.get("db") or table.args.get("catalog"):
                continue
            source = scope.cte_sources.get(table.name)
            if not isinstance(source, Scope):
                continue
            cte = source.expression.parent
            while cte is not None and not isinstance(cte, exp.CTE):
                cte = cte.parent
            if cte is not None:
                refs[id(table)] = cte
    return refs


def check_relations(tree: exp.Expression, allowed: frozenset[str]) -> None:
    """Raise Druid's ``Object 'x' not found`` (400) for any relation of ``tree`` that is neither a CTE
    in scope nor in ``allowed``."""
    refs = cte_references(tree)
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            raise object_not_found(table.sql(dialect="duckdb"))
        if table.args.get("db") or table.args.get("catalog"):
            raise object_not_found(".".join(p.name for p in table.parts))
        if id(table) not in refs and table.name not in allowed:
            raise object_not_found(table.name)


_CHECKED: OrderedDict[tuple[str, frozenset[str]], bool] = OrderedDict()
_CHECKED_LOCK = threading.Lock()
_CHECKED_SIZE = 1024


def check_statement(sql: str, allowed: frozenset[str]) -> None:
    """:func:`check_relations` on a DuckDB statement text (a statement that does not parse, or is more
    than one, is refused). Passing statements are remembered: dashboards repeat theirs."""
    key = (sql, allowed)
    with _CHECKED_LOCK:
        if key in _CHECKED:
            _CHECKED.move_to_end(key)
            return
    try:
        trees = [t for t in sqlglot.parse(sql, dialect="duckdb") if t is not None]
    except SqlglotError as e:
        raise invalid_input("The statement could not be checked") from e
    if len(trees) != 1:
        raise invalid_input("Exactly one statement may run")
    check_relations(trees[0], allowed)
    with _CHECKED_LOCK:
        _CHECKED[key] = True
        while len(_CHECKED) > _CHECKED_SIZE:
            _CHECKED.popitem(last=False)
