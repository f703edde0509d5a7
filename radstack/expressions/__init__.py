"""Druid's native expression language (transformSpec transforms, virtual columns, expression filters,
expression aggregators and post-aggregators), parsed to a small AST and compiled to SQL.

    >>> expression_to_sql("concat(upper(page), '-', strlen(page))", column_types={"page": "STRING"})

Semantics follow Druid with SQL-compatible null handling: ``null`` propagates through operators and
most functions; comparisons and ``&& || !`` yield ``1``/``0`` longs (or ``null``, three-valued);
truthiness of a long/double is ``> 0`` and of a string is ``'true'`` (case-insensitive); ``/`` of two
longs is integer division (truncating, like Java); division or modulo by zero yields ``null``.
Within expressions ``__time`` is epoch millis: the compiled SQL reads the table's ``__time`` TIMESTAMP
column through ``epoch_ms("__time")`` (DuckDB) or ``unix_millis(`__time`)`` (Spark).

Two dialects are produced (:mod:`radstack.sql_text`). The parser is :mod:`.ast`, the compiler
:mod:`.compiler`, the function table :mod:`.functions`; the time functions render through
:mod:`radstack.time.sql` and :mod:`radstack.time.floor`, which the SQL layer shares.
"""

from radstack.expressions import functions as _functions  # noqa: F401  (fills the function table)
from radstack.expressions import json_functions as _json_functions  # noqa: F401  (the JSON functions)
from radstack.expressions.ast import (
    Binary,
    Call,
    Expr,
    Identifier,
    Literal,
    Unary,
    parse_expression,
    required_columns,
)
from radstack.expressions.compiler import (
    Compiled,
    Compiler,
    compile_expression,
    expression_to_predicate_sql,
    expression_to_sql,
    json_scalar_text,
    normalize_type,
    scalar_of_mapped,
)
from radstack.sql_text import ExpressionError

__all__ = [
    "Binary",
    "Call",
    "Compiled",
    "Compiler",
    "Expr",
    "ExpressionError",
    "Identifier",
    "Literal",
    "Unary",
    "compile_expression",
    "expression_to_predicate_sql",
    "expression_to_sql",
    "json_scalar_text",
    "normalize_type",
    "parse_expression",
    "required_columns",
    "scalar_of_mapped",
]
