"""radstack's answers written as Druid's quidem tests print them (through Druid's JDBC driver):
TIMESTAMP as ``2022-01-01 00:00:00.000``, DOUBLE and FLOAT as Java's ``Double``/``Float.toString``,
arrays as Java lists (``[a, 1.0, null]``), a multi-value string as a JSON array of strings, JSON
(``COMPLEX<json>``) as compact JSON text, NULL as an empty cell (quidem's mysql format does not tell
NULL from ''). Only formatting happens here; values are never adjusted toward the expected text."""

from __future__ import annotations

import datetime as dt
from typing import Any

import orjson

from radstack.java_numbers import java_double, java_float


def _timestamp(v: Any) -> str:
    if isinstance(v, (int, float)):
        t = dt.datetime.fromtimestamp(v / 1000, tz=dt.UTC)
    else:
        text = str(v).replace("Z", "+00:00")
        try:
            t = dt.datetime.fromisoformat(text)
        except ValueError:
            return str(v)
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{t.microsecond // 1000:03d}"


def _java_element(v: Any, elem_type: str) -> str:
    """An element inside a Java ``List.toString`` (arrays and nested arrays)."""
    if v is None:
        return "null"
    if isinstance(v, list):
        return "[" + ", ".join(_java_element(x, elem_type) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) or (elem_type in ("DOUBLE", "FLOAT") and isinstance(v, int)):
        return java_float(float(v)) if elem_type == "FLOAT" else java_double(float(v))
    if isinstance(v, dict):
        return orjson.dumps(v).decode()
    return str(v)


def cell(v: Any, sql_type: str) -> str:
    """One value as its quidem cell text."""
    if v is None:
        return ""
    t = (sql_type or "").upper()
    if t.startswith(("ARRAY", "VARCHAR ARRAY", "BIGINT ARRAY", "DOUBLE ARRAY")) or t.endswith(" ARRAY"):
        if isinstance(v, str):
            try:
                v = orjson.loads(v)
            except orjson.JSONDecodeError:
                return v
        elem = t.removesuffix(" ARRAY") if t.endswith(" ARRAY") else t[t.find("<") + 1:t.rfind(">")]
        return _java_element(v, elem)
    if t == "OTHER":  # COMPLEX<json>: JSON text (Druid 33's SQL answers send it as text, a string quoted)
        return v if isinstance(v, str) else orjson.dumps(v).decode()
    if t == "TIMESTAMP":
        return _timestamp(v)
    if t == "DATE":
        return _timestamp(v)[:10]
    if t in ("DOUBLE", "DECIMAL", "REAL") and isinstance(v, (int, float)) and not isinstance(v, bool):
        return java_double(float(v))
    if t == "FLOAT" and isinstance(v, (int, float)) and not isinstance(v, bool):
        return java_float(float(v))
    if t == "BOOLEAN":
        return "true" if v in (True, 1, "true") else "false"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, dict)):
        # a multi-value string (a JSON array of strings), or a JSON value (compact JSON text)
        return orjson.dumps(v).decode()
    if isinstance(v, float):
        return java_double(v)
    return str(v)


def rows_as_cells(rows: list[list[Any]], sql_types: list[str]) -> list[tuple[str, ...]]:
    return [tuple(cell(v, sql_types[i] if i < len(sql_types) else "") for i, v in enumerate(row)) for row in rows]
