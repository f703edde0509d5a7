"""Rendering values as Druid's JSON does (longs as ints, floats as Java floats, nulls as null)."""

from __future__ import annotations

import json
import math
from datetime import datetime
from decimal import Decimal
from typing import Any

import numpy as np

from radstack.sketches import count
from radstack.time.intervals import datetime_to_ms


def render(value: Any, typ: str) -> Any:
    if value is None:
        return None
    if isinstance(value, datetime):
        return datetime_to_ms(value)
    if isinstance(value, Decimal):
        value = float(value)
    if typ == "LONG":
        if isinstance(value, float):
            return None if math.isnan(value) else int(value)
        return int(value) if isinstance(value, int | bool) else value
    if typ == "DOUBLE":
        return float(value) if isinstance(value, int | float) else value
    if typ == "FLOAT":
        if isinstance(value, int | float):
            f = np.float32(value)
            return float(repr(f.item())) if not np.isfinite(f) else float(np.format_float_positional(f, unique=True, trim="0"))
        return value
    if typ == "STRING":
        if isinstance(value, list):  # a multi-value dimension: one value as itself, several as a list
            return value[0] if len(value) == 1 else value
        return value if isinstance(value, str) else str(value)
    if typ == "COMPLEX<json>" and isinstance(value, str):  # a nested column: its JSON, not a string
        return json.loads(value)
    if typ == "COMPLEX<quantilesDoublesSketch>" and isinstance(value, bytes):  # finalized: its count
        return count(value)
    return value


def render_row(names: list[str], types: list[str], row: tuple[Any, ...] | list[Any]) -> dict[str, Any]:
    return {n: render(v, t) for n, t, v in zip(names, types, row, strict=False)}
