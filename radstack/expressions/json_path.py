"""Druid's JSON paths (JSONPath ``$.a.b[0]``, ``$['a b']``, ``$.`` for the root, or jq-style
``.a.b[0]``) written in DuckDB's JSONPath syntax: one reading for the native expressions
(:mod:`.json_functions`) and the SQL functions (``serving/broker/sql/rules/json_functions.py``)."""

from __future__ import annotations

import re

from radstack.sql_text import ExpressionError

_SIMPLE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_STEP = re.compile(r'\.(?:"((?:[^"\\]|\\.)*)"|([^.\[\]"]+))|\[(-?\d+)\]|\[\'((?:[^\'\\]|\\.)*)\'\]|\["((?:[^"\\]|\\.)*)"\]')


def path_key(name: str) -> str:
    """One object key as a DuckDB path step."""
    return f".{name}" if _SIMPLE_KEY.match(name) else '."' + name.replace('"', '\\"') + '"'


def duckdb_json_path(text: str) -> str:
    """``text`` (a Druid JSON path) as DuckDB JSONPath; :class:`ExpressionError` when it is not one."""
    path = text.strip()
    rest = path[1:] if path.startswith("$") else path
    if rest == ".":  # Druid reads "$." as the root
        rest = ""
    out, pos = "$", 0
    while pos < len(rest):
        m = _STEP.match(rest, pos)
        if m is None:
            raise ExpressionError(f"invalid JSON path [{text}]")
        dq, plain, idx, sq, bq = m.groups()
        if idx is not None:
            out += f"[{idx}]"
        else:
            out += path_key(next(g for g in (dq, plain, sq, bq) if g is not None))
        pos = m.end()
    return out
