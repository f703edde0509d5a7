"""Druid filters (native queries, transformSpec filters, filtered aggregators) → SQL predicates.

    >>> filter_to_sql({"type": "selector", "dimension": "page", "value": "Main"})
    '("page" = \\'Main\\')'

Semantics are Druid's SQL-compatible null handling: a filter on a null value is *unknown*, so it does
not match, and neither does its ``not`` (SQL three-valued logic gives exactly that); ``selector`` /
``in`` with a ``null`` value match ``IS NULL``; ``selector``, ``in`` and ``equals`` on numeric columns
compare numerically (values that are not numbers match nothing). Identifiers are always quoted and
string values always go through :func:`radstack.sql_text.string_literal`, so filter values cannot
inject SQL. ``__time`` is read as epoch millis (a TIMESTAMP column unless ``column_types`` says
otherwise).

Supported types: ``selector``, ``equals``, ``range``, ``in``, ``bound`` (orderings lexicographic,
alphanumeric, numeric, strlen), ``and``, ``or``, ``not``, ``regex``, ``like``, ``interval``,
``search`` (contains, insensitive_contains, fragment), ``columnComparison``, ``expression``,
``true``, ``false``, ``null``, ``arrayContainsElement``; ``equals`` with an ``ARRAY<…>``
``matchValueType`` compares the whole array. Extraction functions: ``substring``, ``strlen``, ``upper``, ``lower``,
``timeFormat``, ``regex``, ``partial``, ``identity``, ``cascade``.

Multi-value string columns (``multi_value_columns``, DuckDB lists): a filter on one matches a row when
it matches any of its values, as in Druid, with SQL's three values (unknown when none matches but one
is NULL, so ``not`` of it holds when no value matches and none is NULL); a row without values is read as
one NULL value, so ``null`` matches rows without values or with a NULL value.

The parts: :mod:`.columns` (column references, values, :class:`FilterError`), :mod:`.extraction` (the
extraction functions), :mod:`.compiler` (the filter types).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from radstack.expressions import required_columns
from radstack.filters.columns import FilterError
from radstack.filters.compiler import FilterCompiler

__all__ = ["FilterError", "filter_to_sql", "extraction_to_sql", "filter_columns"]


def filter_to_sql(
    f: Mapping[str, Any] | None,
    *,
    dialect: str = "duckdb",
    column_types: Mapping[str, str] | None = None,
    multi_value_columns: frozenset[str] = frozenset(),
) -> str:
    """A Druid filter (JSON object) as a SQL boolean predicate (``TRUE`` for ``None``).
    ``multi_value_columns``: columns holding lists of strings (DuckDB only), matched by any value.

    Raises :class:`FilterError` (with ``.field``) for unknown types, bad fields and unsupported
    extraction functions.
    """
    if f is None:
        return "TRUE"
    return FilterCompiler(dialect, column_types, multi_value_columns).compile(f)


def extraction_to_sql(
    fn: Mapping[str, Any],
    column: str,
    *,
    dialect: str = "duckdb",
    column_types: Mapping[str, str] | None = None,
) -> str:
    """A Druid extraction function applied to ``column`` as a SQL string expression
    (also used for DimensionSpecs with an ``extractionFn`` in the query engine)."""
    comp = FilterCompiler(dialect, column_types)
    return comp.extraction(fn, comp.column(column, "dimension"), "extractionFn")


def filter_columns(f: Mapping[str, Any] | None) -> set[str]:
    """The column names a filter reads (for pruning the columns a scan must load)."""

    out: set[str] = set()

    def walk(x: Any) -> None:
        if not isinstance(x, Mapping):
            return
        for key in ("dimension", "column"):
            if isinstance(x.get(key), str):
                out.add(x[key])
        if x.get("type") == "interval" and not x.get("dimension"):
            out.add("__time")
        if x.get("type") == "expression" and isinstance(x.get("expression"), str):
            out.update(required_columns(x["expression"]))
        for d in x.get("dimensions") or []:
            if isinstance(d, str):
                out.add(d)
            else:
                walk(d)
        for sub in x.get("fields") or []:
            walk(sub)
        walk(x.get("field"))

    walk(f)
    return out
