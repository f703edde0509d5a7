"""The expression compiler: an AST to SQL for one dialect, with Druid's types and null semantics. The
functions it knows are registered in :data:`FUNCTIONS` by :mod:`radstack.expressions.functions`."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass

from radstack.expressions.ast import (
    Binary,
    Call,
    Expr,
    Identifier,
    Literal,
    Unary,
    identifier_uses,
    parse_expression,
)
from radstack.sql_text import (
    DEFAULT_MAX_VALUE_BYTES,
    RESOURCE_LIMIT_PREFIX,
    ExpressionError,
    byte_length_sql,
    check_dialect,
    concat_sql,
    int_div,
    quote_identifier,
    string_literal,
    string_type,
    value_limit_sql,
)
from radstack.value_sql import values_or_null_sql

#: the largest string one function call may build (``server.max_string_bytes``): a native query sets it
#: for its own compilation (serving/broker/native); ingestion transforms use the default
VALUE_LIMIT: ContextVar[int] = ContextVar("value_limit", default=DEFAULT_MAX_VALUE_BYTES)

#: a checked expression's SQL longer than this is refused rather than copied into its parent's check
#: (nested checks would otherwise grow the statement without bound)
MAX_CHECKED_SQL_CHARS = 200_000

_TYPE_ALIASES = {
    "LONG": "LONG", "BIGINT": "LONG", "INTEGER": "LONG", "INT": "LONG", "SMALLINT": "LONG",
    "TINYINT": "LONG", "INT64": "LONG", "INT32": "LONG", "BOOLEAN": "LONG",
    "DOUBLE": "DOUBLE", "FLOAT": "DOUBLE", "REAL": "DOUBLE", "DECIMAL": "DOUBLE", "FLOAT64": "DOUBLE",
    "FLOAT32": "DOUBLE", "NUMERIC": "DOUBLE",
    "STRING": "STRING", "VARCHAR": "STRING", "TEXT": "STRING", "CHAR": "STRING",
    "TIMESTAMP": "TIMESTAMP", "TIMESTAMP[MS]": "TIMESTAMP", "TIMESTAMP_MS": "TIMESTAMP",
}  # fmt: skip


def normalize_type(t: str | None) -> str | None:
    """Druid/SQL/Arrow type names → ``LONG`` | ``DOUBLE`` | ``STRING`` | ``TIMESTAMP`` | None."""
    if t is None:
        return None
    key = str(t).strip().upper()
    if key in _TYPE_ALIASES:
        return _TYPE_ALIASES[key]
    base = key.split("(")[0].strip()
    if base.startswith("TIMESTAMP"):
        return "TIMESTAMP"
    return _TYPE_ALIASES.get(base)


@dataclass(frozen=True)
class Compiled:
    """A compiled expression: SQL text and its Druid type (``LONG``/``DOUBLE``/``STRING``/``JSON``/None)."""

    sql: str
    type: str | None
    bool_sql: str | None = None  # a SQL boolean form, when the expression is a predicate
    size: str | None = None  # a checked value: SQL of the largest size it can have (value_limit_sql)
    #: the SQL is a list: the expression applied to each value of the multi-value columns it reads as
    #: scalars (Druid's implicit mapping; ``type`` is the type of one result)
    mapped: bool = False


def operator_type(a: str | None, b: str | None) -> str | None:
    if a is None:
        return b
    if b is None:
        return a
    if a == "STRING" and b == "STRING":
        return "STRING"
    return "LONG" if a == "LONG" and b == "LONG" else "DOUBLE"


def function_type(a: str | None, b: str | None) -> str | None:
    if a is None:
        return b
    if b is None:
        return a
    if "STRING" in (a, b):
        return "STRING"
    return "LONG" if a == "LONG" and b == "LONG" else "DOUBLE"


_SQL_TYPES = {"LONG": "BIGINT", "DOUBLE": "DOUBLE", "STRING": "VARCHAR"}


class Compiler:
    def __init__(self, dialect: str, column_types: Mapping[str, str] | None) -> None:
        self.d = check_dialect(dialect)
        self.types = {k: normalize_type(v) for k, v in (column_types or {}).items()}
        self.value_limit = VALUE_LIMIT.get()
        self.value_of: dict[str, str] = {}  # a mapped multi-value column → the lambda variable of one value

    def mapped(self, node: Expr, columns: Sequence[str], *, predicate: bool = False) -> Compiled:
        """``node`` applied to each value of the multi-value ``columns`` (DuckDB lists; a row without
        values as one NULL value), as Druid maps an expression that reads such a column as a scalar:
        one column → ``map``, several → ``cartesian_map``. A ``predicate`` holds when it holds for one
        of the values (Druid's expression filter over a multi-value column)."""
        names = [f"__mv{i}" for i in range(len(columns))]
        self.value_of.update(zip(columns, names, strict=True))
        inner = self.compile(node)
        body = self.boolean(inner) if predicate else inner.sql
        for i in reversed(range(len(columns))):
            listed = f"list_transform({values_or_null_sql(quote_identifier(columns[i], self.d))}, lambda {names[i]}: {body})"
            body = listed if i == len(columns) - 1 else f"flatten({listed})"
        if predicate:
            return self.pred(f"list_bool_or({body})")
        return Compiled(body, inner.type, mapped=True)

    # -- the per-value budget (radstack.sql_text.value_limit_sql)
    def size_of(self, c: Compiled) -> str:
        """The largest size ``c``'s value can have: its checked bound, else its measured bytes."""
        if c.size is not None:
            return c.size
        if RESOURCE_LIMIT_PREFIX in c.sql and len(c.sql) > MAX_CHECKED_SQL_CHARS:
            raise ExpressionError("the expression nests too many growing functions (repeat, concat, pad …)")
        return byte_length_sql(c.sql, self.d)

    def limited(self, value: str, bound: str, name: str) -> Compiled:
        """A STRING ``value`` checked before it is built: past ``server.max_string_bytes`` the query fails
        (no check when it is 0)."""
        if self.value_limit <= 0:
            return Compiled(value, "STRING")
        return Compiled(value_limit_sql(value, bound, self.value_limit, name, self.d), "STRING", size=bound)

    def limited_concat(self, parts: Sequence[Compiled]) -> Compiled:
        sqls = [p.sql for p in parts]
        if len(parts) == 1:
            return Compiled(sqls[0], "STRING", size=parts[0].size)
        return self.limited(concat_sql(sqls, self.d), " + ".join(f"({self.size_of(p)})" for p in parts), "concat")

    # -- helpers
    def sqltype(self, t: str) -> str:
        if t == "STRING":
            return string_type(self.d)
        return _SQL_TYPES[t]

    def coerce(self, c: Compiled, to: str | None) -> str:
        if to is None or c.type == to or c.sql == "NULL":
            return c.sql
        if c.type == "JSON":  # a JSON scalar's text (a string unquoted), then as from a string
            c = Compiled(f"json_extract_string({c.sql}, '$')", "STRING")
            if to == "STRING":
                return c.sql
        if to == "STRING":
            return f"CAST({c.sql} AS {self.sqltype('STRING')})"
        if to == "LONG":
            return self.truncate_to_long(c.sql, from_string=c.type != "DOUBLE")
        if c.type == "LONG":
            return f"CAST({c.sql} AS DOUBLE)"
        return f"TRY_CAST({c.sql} AS DOUBLE)"

    def truncate_to_long(self, sql: str, from_string: bool = False) -> str:
        """Java's (long) cast: truncation toward zero (DuckDB's CAST rounds; Spark's truncates)."""
        if from_string:
            sql = f"TRY_CAST({sql} AS DOUBLE)"
        if self.d == "spark":
            return f"TRY_CAST({sql} AS BIGINT)"
        return f"TRY_CAST(trunc({sql}) AS BIGINT)"

    def num(self, c: Compiled) -> str:
        return self.coerce(c, "DOUBLE") if c.type in ("STRING", "JSON") else c.sql

    def string(self, c: Compiled) -> str:
        return self.coerce(c, "STRING") if c.type not in ("STRING", None) else c.sql

    def boolean(self, c: Compiled) -> str:
        if c.bool_sql is not None:
            return c.bool_sql
        if c.sql == "NULL":
            return "CAST(NULL AS BOOLEAN)"
        if c.type == "STRING":
            return f"(lower({c.sql}) = 'true')"
        return f"({c.sql} > 0)"

    def pred(self, b: str) -> Compiled:
        return Compiled(f"CAST({b} AS BIGINT)", "LONG", b)

    def lit_str(self, s: str) -> str:
        return string_literal(s, self.d)

    # -- nodes
    def compile(self, n: Expr) -> Compiled:
        if isinstance(n, Literal):
            return self.literal(n)
        if isinstance(n, Identifier):
            return self.identifier(n.name)
        if isinstance(n, Unary):
            arg = self.compile(n.arg)
            if n.op == "!":
                return self.pred(f"(NOT {self.boolean(arg)})")
            t = "DOUBLE" if arg.type == "STRING" else arg.type
            return Compiled(f"(- {self.num(arg)})", t)
        if isinstance(n, Binary):
            return self.binary(n)
        return self.call(n)

    def literal(self, n: Literal) -> Compiled:
        if n.value is None:
            return Compiled("NULL", None)
        if n.type == "STRING":
            assert isinstance(n.value, str)
            return Compiled(self.lit_str(n.value), "STRING")
        if n.type == "LONG":
            return Compiled(f"CAST({int(n.value)} AS BIGINT)", "LONG")
        v = float(n.value)  # type: ignore[arg-type]
        if math.isnan(v) or math.isinf(v):
            word = "NaN" if math.isnan(v) else ("-Infinity" if v < 0 else "Infinity")
            return Compiled(f"CAST('{word}' AS DOUBLE)", "DOUBLE")
        return Compiled(f"CAST({v!r} AS DOUBLE)", "DOUBLE")

    def identifier(self, name: str) -> Compiled:
        if name in self.value_of:
            return Compiled(self.value_of[name], "STRING")
        t = self.types.get(name)
        if name == "__time" and t is None:
            t = "TIMESTAMP"
        q = quote_identifier(name, self.d)
        if t == "TIMESTAMP":
            return Compiled(f"unix_millis({q})" if self.d == "spark" else f"epoch_ms({q})", "LONG")
        return Compiled(q, t)

    def binary(self, n: Binary) -> Compiled:
        a, b = self.compile(n.left), self.compile(n.right)
        op = n.op
        if op in ("&&", "||"):
            word = "AND" if op == "&&" else "OR"
            return self.pred(f"({self.boolean(a)} {word} {self.boolean(b)})")
        t = operator_type(a.type, b.type)
        if op in ("<", "<=", ">", ">=", "==", "!="):
            sop = {"==": "=", "!=": "<>"}.get(op, op)
            if t == "STRING" or (a.type in ("STRING", None) and b.type in ("STRING", None)):
                return self.pred(f"({a.sql} {sop} {b.sql})")
            return self.pred(f"({self.num(a)} {sop} {self.num(b)})")
        if op == "+" and t == "STRING":
            return self.limited_concat([a, b])
        if t == "STRING":
            t = "DOUBLE"
        x, y = self.num(a), self.num(b)
        if op == "^":
            out = f"power({x}, {y})"
            return Compiled(f"CAST({out} AS BIGINT)" if t == "LONG" else out, t or "DOUBLE")
        if op == "/":
            if t == "LONG":
                return Compiled(int_div(x, f"NULLIF({y}, 0)", self.d), "LONG")
            if t == "DOUBLE":
                x = x if a.type == "DOUBLE" else f"CAST({x} AS DOUBLE)"
            return Compiled(f"({x} / NULLIF({y}, 0))", t)
        if op == "%":
            return Compiled(f"({x} % NULLIF({y}, 0))", t)
        return Compiled(f"({x} {op} {y})", t)

    # -- functions
    def call(self, n: Call) -> Compiled:
        fn = FUNCTIONS.get(n.name)
        if fn is None:
            raise ExpressionError(f"unknown function '{n.name}'")
        lo, hi, impl = fn
        if not (lo <= len(n.args) <= hi):
            want = str(lo) if lo == hi else f"{lo}..{hi if hi < 99 else 'n'}"
            raise ExpressionError(f"function '{n.name}' needs {want} arguments, got {len(n.args)}")
        return impl(self, n.name, n.args)

    def const_str(self, fname: str, node: Expr, what: str) -> str | None:
        if isinstance(node, Literal) and (node.type == "STRING" or node.value is None):
            return node.value  # type: ignore[return-value]
        raise ExpressionError(f"function '{fname}': {what} must be a string literal")

    def const_int(self, fname: str, node: Expr, what: str) -> int:
        if isinstance(node, Literal) and node.type == "LONG":
            return int(node.value)  # type: ignore[arg-type]
        raise ExpressionError(f"function '{fname}': {what} must be a long literal")

    def millis(self, node: Expr) -> str:
        c = self.compile(node)
        return c.sql if c.type == "LONG" else self.coerce(c, "LONG")


Impl = Callable[[Compiler, str, tuple[Expr, ...]], Compiled]
FUNCTIONS: dict[str, tuple[int, int, Impl]] = {}


def function(name: str, lo: int, hi: int | None = None) -> Callable[[Impl], Impl]:
    def deco(f: Impl) -> Impl:
        for nm in name.split():
            FUNCTIONS[nm] = (lo, lo if hi is None else hi, f)
        return f

    return deco


# string functions
@function("concat", 1, 999)
def _concat_fn(c: Compiler, _n: str, args: tuple[Expr, ...]) -> Compiled:
    parts = []
    for a in args:
        compiled = c.compile(a)
        parts.append(Compiled(c.string(compiled), "STRING", size=compiled.size))
    return c.limited_concat(parts)


def compile_expression(
    expr: str | Expr, *, dialect: str = "duckdb", column_types: Mapping[str, str] | None = None,
    multi_value_columns: frozenset[str] = frozenset(), predicate: bool = False,
) -> Compiled:
    """Compile an expression (text or AST) to SQL plus its Druid output type. An expression reading one
    of the ``multi_value_columns`` (DuckDB lists) as a scalar is applied to each of its values
    (:meth:`Compiler.mapped`); ``predicate``: its SQL boolean form (``bool_sql``) is what is wanted."""
    node = parse_expression(expr) if isinstance(expr, str) else expr
    c = Compiler(dialect, column_types)
    columns = mapped_columns(node, multi_value_columns, row_tests=not predicate)
    if columns:
        return c.mapped(node, columns, predicate=predicate)
    return c.compile(node)


#: functions that test a whole row of a multi-value column where a value is read (Druid's groupBy reads
#: ``isnull(tags)`` as "the row has no values", as radstack's SQL reads ``tags IS NULL``); a filter
#: maps them too (``isnull(tags)`` matches a row with a NULL value)
_ROW_TESTS = frozenset({"isnull", "notnull"})


def mapped_columns(node: Expr, multi_value_columns: frozenset[str], *, row_tests: bool = True) -> list[str]:
    """The multi-value columns ``node`` reads as scalars, in first-use order: every use but, with
    ``row_tests``, as the argument of a row test."""
    if not multi_value_columns:
        return []
    out: dict[str, None] = {}
    for ident, call in identifier_uses(node):
        if ident.name in multi_value_columns and not (row_tests and call is not None and call.name in _ROW_TESTS):
            out.setdefault(ident.name, None)
    return list(out)


def scalar_of_mapped(c: Compiled) -> str:
    """A mapped result read as one value (a numeric selector over it, an aggregator's input): its only
    value, NULL when it has several — as Druid reads an array where a scalar is expected."""
    if not c.mapped:
        return c.sql
    return f"(CASE WHEN len({c.sql}) = 1 THEN ({c.sql})[1] END)"


def json_scalar_text(sql: str) -> str:
    """The text of the JSON scalar ``sql`` as Druid reads a nested field: a string unquoted, a number as
    written, a boolean as the long Druid stores for it (``1``/``0``); NULL for none (DuckDB)."""
    text = f"json_extract_string({sql}, '$')"
    return f"(CASE WHEN json_type({sql}) = 'BOOLEAN' THEN (CASE WHEN {text} = 'true' THEN '1' ELSE '0' END) ELSE {text} END)"


def expression_to_sql(
    text: str, *, dialect: str = "duckdb", column_types: Mapping[str, str] | None = None
) -> str:
    """A Druid expression as a SQL expression for ``dialect`` (``duckdb`` or ``spark``).

    ``column_types`` maps column names to Druid/SQL types (``LONG``, ``DOUBLE``, ``STRING``,
    ``TIMESTAMP`` …); it decides e.g. whether ``+`` adds or concatenates and whether ``/`` is integer
    division. ``__time`` is a TIMESTAMP column unless ``column_types`` says otherwise.
    """
    return compile_expression(text, dialect=dialect, column_types=column_types).sql


def expression_to_predicate_sql(
    text: str, *, dialect: str = "duckdb", column_types: Mapping[str, str] | None = None,
    multi_value_columns: frozenset[str] = frozenset(),
) -> str:
    """A Druid expression as a SQL boolean (Druid truthiness; NULL stays NULL). Over one of the
    ``multi_value_columns`` it holds when it holds for one of the row's values (Druid's expression
    filter)."""
    compiled = compile_expression(text, dialect=dialect, column_types=column_types,
                                  multi_value_columns=multi_value_columns, predicate=True)
    return Compiler(dialect, column_types).boolean(compiled)
