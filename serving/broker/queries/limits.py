"""How big and how deep a query may be before it is refused with a 400 instead of tying the server up.

Druid answers a query it will not run with ``Resource limit exceeded`` or an invalid-input error; a
query that is only too big or too deep is the client's mistake, never a 500. The limits are settings
(``server.max_sql_chars``, ``server.max_query_depth``, ``server.max_string_bytes``), checked before any
planning: the SQL text's length and nesting by one linear scan, a native query's JSON nesting without
recursion. :func:`planning_guard` turns what still runs too deep inside a planner (Python's recursion
limit) into the same 400.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

from radstack.sql_text import RESOURCE_LIMIT_PREFIX
from serving.errors import DruidError, user_message

__all__ = ["check_json_depth", "check_sql_text", "planning_guard", "resource_limit", "too_complex", "too_large"]


def too_complex(message: str) -> DruidError:
    return DruidError(f"Query too complex: {message}", category="INVALID_INPUT",
                      context={"legacyErrorCode": "Resource limit exceeded"})


def too_large(message: str) -> DruidError:
    return DruidError(message, category="INVALID_INPUT", context={"legacyErrorCode": "Resource limit exceeded"})


def resource_limit(engine_message: str) -> DruidError | None:
    """The engine's failure as Druid's resource-limit error when a value-size check raised it
    (:func:`radstack.sql_text.value_limit_sql`, DuckDB's ``error()``); else None."""
    at = engine_message.find(RESOURCE_LIMIT_PREFIX)
    if at < 0:
        return None
    return too_large(user_message(engine_message[at + len(RESOURCE_LIMIT_PREFIX):]))


def _word_at(sql: str, i: int, word: str) -> bool:
    n = len(word)
    if sql[i:i + n].upper() != word:
        return False
    before = sql[i - 1] if i else " "
    after = sql[i + n] if i + n < len(sql) else " "
    return not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_")


def sql_depth(sql: str) -> int:
    """The deepest nesting of ``sql``: parentheses, plus a run of ``NOT``s (each negates what follows),
    outside string literals, quoted identifiers and comments. One pass, no recursion."""
    depth = deepest = nots = 0
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"":
            j = i + 1
            while j < n and not (sql[j] == c and (j + 1 >= n or sql[j + 1] != c)):
                j += 2 if sql[j] == c else 1
            i = j + 1
            nots = 0
            continue
        if c == "-" and sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if c == "/" and sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth = max(0, depth - 1)
            nots = 0
        elif c in "nN" and _word_at(sql, i, "NOT"):
            nots += 1
            i += 3
            deepest = max(deepest, depth + nots)
            continue
        elif not c.isspace():
            nots = 0
        deepest = max(deepest, depth + nots)
        i += 1
    return deepest


#: dashboards repeat their statements: the depth of recent short ones is remembered (at most 256 × 4 KiB)
_remembered_depth = functools.lru_cache(maxsize=256)(sql_depth)
_REMEMBERED_CHARS = 4096


def check_sql_text(sql: str, *, max_chars: int, max_depth: int) -> None:
    """Refuse SQL longer than ``max_chars`` or nested deeper than ``max_depth`` (400)."""
    if max_chars and len(sql) > max_chars:
        raise too_large(f"The SQL query is {len(sql):,} characters long; the limit is {max_chars:,} "
                        "(server.max_sql_chars)")
    if max_depth:
        depth = _remembered_depth(sql) if len(sql) <= _REMEMBERED_CHARS else sql_depth(sql)
        if depth > max_depth:
            raise too_complex(f"it nests {depth} levels deep (parentheses, NOTs, subqueries); the limit is "
                              f"{max_depth} (server.max_query_depth)")


def json_depth(value: Any) -> int:
    """The nesting depth of a JSON value (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, d = stack.pop()
        deepest = max(deepest, d)
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
        elif isinstance(v, str) and d and ("(" in v or "not" in v.lower()):
            deepest = max(deepest, d + sql_depth(v))  # an expression string nests too
    return deepest


def check_json_depth(query: Any, *, max_depth: int, allowance: int = 8) -> None:
    """Refuse a native query nested deeper than ``max_depth`` plus the ``allowance`` its own shape takes
    (query → filter → fields → …)."""
    if max_depth:
        depth = json_depth(query)
        if depth > max_depth + allowance:
            raise too_complex(f"it nests {depth} levels deep (filters, expressions, having specs); the limit is "
                              f"{max_depth + allowance} (server.max_query_depth + {allowance})")


@contextlib.contextmanager
def planning_guard() -> Iterator[None]:
    """What runs too deep for a planner despite the checks above becomes the same 400."""
    try:
        yield
    except RecursionError:
        raise too_complex("it nests too deeply to plan (server.max_query_depth)") from None
