"""Druid's JSON expression functions (``json_value``, ``json_query``, ``parse_json``,
``try_parse_json``, ``to_json_string``, ``json_object``, ``json_keys``, ``json_paths``), as used in
``transformSpec`` transforms and virtual columns. Their values are JSON (type ``JSON``): DuckDB's JSON
text, which the indexer's type discovery reads value by value (:mod:`radstack.storage.type_discovery`).

An input column reaches them as JSON: numbers through ``to_json``; a string column holds nested input
values as JSON text (the readers keep objects and arrays that way), so a string that starts with ``[``
or ``{`` and is valid JSON is read as that JSON, any other string as a JSON string. DuckDB only: the
Spark jobs run transforms of datasource specs, which declare their columns' types.
"""

from __future__ import annotations

from radstack.expressions.ast import Expr
from radstack.expressions.compiler import Compiled, Compiler, function, json_scalar_text
from radstack.expressions.json_path import duckdb_json_path
from radstack.sql_text import ExpressionError


def _duckdb_only(c: Compiler, n: str) -> None:
    if c.d != "duckdb":
        raise ExpressionError(f"function '{n}' runs in native batch tasks and queries, not in the Spark jobs")


def as_json(c: Compiler, e: Compiled) -> str:
    """``e`` as a DuckDB JSON value."""
    if e.type == "JSON":
        return e.sql
    if e.sql == "NULL":
        return "CAST(NULL AS JSON)"
    if e.type in ("LONG", "DOUBLE"):
        return f"to_json({e.sql})"
    s = c.string(e)
    return (f"(CASE WHEN (starts_with({s}, '[') OR starts_with({s}, '{{')) AND json_valid({s}) "
            f"THEN json({s}) ELSE to_json({s}) END)")


def _path(c: Compiler, n: str, node: Expr) -> str:
    path = c.const_str(n, node, "the path")
    if path is None:
        raise ExpressionError(f"function '{n}': the path must be a JSONPath string")
    try:
        return c.lit_str(duckdb_json_path(path))
    except ExpressionError as e:
        raise ExpressionError(f"function '{n}': {e}") from e


def _not_null(j: str) -> str:
    """JSON ``null`` → SQL NULL."""
    return f"(CASE WHEN json_type({j}) = 'NULL' THEN NULL ELSE {j} END)"


@function("json_query", 2)
def _json_query(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    _duckdb_only(c, n)
    return Compiled(_not_null(f"json_extract({as_json(c, c.compile(args[0]))}, {_path(c, n, args[1])})"), "JSON")


@function("json_value", 2, 3)
def _json_value(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    """A scalar at the path (objects and arrays → null); with a type argument, cast to it."""
    _duckdb_only(c, n)
    j = f"json_extract({as_json(c, c.compile(args[0]))}, {_path(c, n, args[1])})"
    scalar = f"(CASE WHEN json_type({j}) IN ('OBJECT', 'ARRAY', 'NULL') THEN NULL ELSE {j} END)"
    if len(args) == 2:
        return Compiled(scalar, "JSON")
    typ = str(c.const_str(n, args[2], "the type") or "").upper()
    text = json_scalar_text(scalar)  # a boolean is 1/0, as Druid stores it
    if typ in ("LONG", "BIGINT"):
        return Compiled(c.truncate_to_long(text, from_string=True), "LONG")
    if typ in ("DOUBLE", "FLOAT"):
        return Compiled(f"TRY_CAST({text} AS DOUBLE)", "DOUBLE")
    if typ in ("STRING", "VARCHAR"):
        return Compiled(text, "STRING")
    raise ExpressionError(f"function '{n}': unsupported type {typ!r} (LONG, DOUBLE or STRING)")


@function("parse_json try_parse_json", 1)
def _parse_json(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    _duckdb_only(c, n)
    s = c.string(c.compile(args[0]))
    return Compiled(f"(CASE WHEN json_valid({s}) THEN json({s}) END)", "JSON")


@function("to_json_string", 1)
def _to_json_string(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    _duckdb_only(c, n)
    return Compiled(f"CAST({as_json(c, c.compile(args[0]))} AS VARCHAR)", "STRING")


@function("json_object", 0, 999)
def _json_object(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    _duckdb_only(c, n)
    if len(args) % 2:
        raise ExpressionError(f"function '{n}' needs key, value pairs")
    parts = []
    for k, v in zip(args[::2], args[1::2], strict=True):
        parts += [c.string(c.compile(k)), as_json(c, c.compile(v))]
    return Compiled(f"json_object({', '.join(parts)})", "JSON")


@function("json_keys", 2)
def _json_keys(c: Compiler, n: str, args: tuple[Expr, ...]) -> Compiled:
    _duckdb_only(c, n)
    j = f"json_extract({as_json(c, c.compile(args[0]))}, {_path(c, n, args[1])})"
    return Compiled(f"(CASE WHEN json_type({j}) = 'OBJECT' THEN to_json(json_keys({j})) END)", "JSON")
