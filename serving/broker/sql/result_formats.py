"""Druid SQL result formats, byte for byte: ``object``, ``array``, ``objectLines``, ``arrayLines``,
``csv``; header rows (names, native types, SQL types); timestamps as ``2015-09-12T00:47:53.259Z``;
doubles written as Java writes them (``1.0``, ``1.0E7``); arrays stringified unless asked not to.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from radstack.druid_types import JSON_ARRAY
from radstack.java_numbers import java_double, java_float
from radstack.time.joda import zone
from radstack.time.sql import is_utc_zone
from serving.errors import DruidError

FORMATS = ("object", "array", "objectLines", "arrayLines", "csv")
CONTENT_TYPES = {
    "object": "application/json",
    "array": "application/json",
    "objectLines": "text/plain",
    "arrayLines": "text/plain",
    "csv": "text/csv",
}


def check_format(name: str | None) -> str:
    fmt = name or "object"
    for f in FORMATS:
        if f.lower() == str(fmt).lower():
            return f
    raise DruidError(f"Unsupported resultFormat [{fmt}], use one of {', '.join(FORMATS)}")


# ---- columns -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    name: str
    sql_type: str  # TIMESTAMP, BIGINT, DOUBLE, FLOAT, VARCHAR, BOOLEAN, DATE, ARRAY, …
    native_type: str  # LONG, DOUBLE, FLOAT, STRING, ARRAY<…>


def _zoned(values: list[Any], tz: tzinfo) -> list[Any]:
    """Instants (UTC datetimes) as Druid writes them in a session zone: ``2024-01-01T00:00:00.000-08:00``."""
    return [None if v is None else v.replace(tzinfo=UTC).astimezone(tz).isoformat(timespec="milliseconds")
            for v in values]


def _python_column(arr: pa.Array, col: Column, stringify_arrays: bool, tz: tzinfo | None = None) -> list[Any]:
    t = arr.type
    if pa.types.is_timestamp(t):
        ms = arr.cast(pa.timestamp("ms"), safe=False)
        if t.tz is not None:
            ms = ms.cast(pa.timestamp("ms"))
        if tz is not None:
            return _zoned(ms.to_pylist(), tz)
        return pc.strftime(ms, format="%Y-%m-%dT%H:%M:%SZ").to_pylist()
    if pa.types.is_date(t):
        if tz is not None:  # a DATE is midnight in the session zone
            return [None if v is None else datetime(v.year, v.month, v.day, tzinfo=tz).isoformat(timespec="milliseconds")
                    for v in arr.to_pylist()]
        return [None if v is None else f"{v.isoformat()}T00:00:00.000Z" for v in arr.to_pylist()]
    if pa.types.is_decimal(t):
        if t.scale == 0:
            return [None if v is None else int(v) for v in arr.to_pylist()]
        return [None if v is None else float(v) for v in arr.to_pylist()]
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):  # a sketch: Base64, as Druid sends it
        return [None if v is None else base64.b64encode(v).decode() for v in arr.to_pylist()]
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_boolean(t.value_type):
        # Druid has no BOOLEAN array elements: ARRAY[true, false] answers [1, 0]
        arr = arr.cast(pa.large_list(pa.int64()) if pa.types.is_large_list(t) else pa.list_(pa.int64()))
        t = arr.type
    values = arr.to_pylist()
    if col.native_type == "COMPLEX<json>":  # Druid 33 answers a JSON value as its compact JSON text
        return [_json_text(v) for v in values]
    if col.native_type == JSON_ARRAY[1]:  # an array of JSON values (JSON_QUERY_ARRAY): its elements as JSON
        values = [None if v is None else [None if e is None else orjson.loads(e) for e in v] for v in values]
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and stringify_arrays:
        return [None if v is None else orjson.dumps(v, default=str).decode() for v in values]
    return values


def _json_text(v: Any) -> str | None:
    """A ``COMPLEX<json>`` cell: the compact JSON text of its value, or null for a JSON null."""
    if v is None:
        return None
    value = orjson.loads(v) if isinstance(v, str | bytes) else v
    return None if value is None else orjson.dumps(value).decode()


def _json_value(v: Any, float32: bool) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, float):
        if not math.isfinite(v):  # Jackson, as Druid configures it, writes NaN and ±Infinity as strings
            return f'"{java_double(v)}"'
        return java_float(v) if float32 else java_double(v)
    if isinstance(v, int):
        return str(v)
    return orjson.dumps(v, default=str).decode()


def _text_value(v: Any, float32: bool) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return java_float(v) if float32 else java_double(v)
    if isinstance(v, str):
        return v
    if isinstance(v, list | dict):
        return orjson.dumps(v, default=str).decode()
    return str(v)


def _csv_line(fields: list[str]) -> str:
    quote_all = len(fields) == 1 and fields[0] == ""
    out = []
    for f in fields:
        if quote_all or any(c in f for c in ('"', ",", "\n", "\r")):
            out.append('"' + f.replace('"', '""') + '"')
        else:
            out.append(f)
    return ",".join(out) + "\n"


# ---- writers -------------------------------------------------------------------------------------------


class ResultWriter:
    """Turns record batches into the chunks of one response body."""

    def __init__(self, fmt: str, columns: list[Column], *, header: bool = False, types_header: bool = False,
                 sql_types_header: bool = False, stringify_arrays: bool = True, time_zone: str | None = None) -> None:
        self.fmt = check_format(fmt)
        #: ``sqlTimeZone``: TIMESTAMP and DATE values are written in it, with its offset (None: UTC, ``Z``)
        zone_name = None if time_zone is None else str(time_zone)
        try:
            self.tz = None if is_utc_zone(zone_name) else zone(zone_name)
        except ValueError as e:
            raise DruidError(f"Invalid sqlTimeZone [{zone_name}]: {e}") from e
        self.columns = columns
        self.header = header
        self.types_header = types_header
        self.sql_types_header = sql_types_header
        self.stringify_arrays = stringify_arrays
        self._first = True
        self._keys = [orjson.dumps(c.name).decode() for c in columns]
        self._float32 = [c.sql_type == "FLOAT" for c in columns]

    @property
    def content_type(self) -> str:
        return CONTENT_TYPES[self.fmt]

    def _sep(self) -> str:
        if self.fmt in ("object", "array"):
            sep = "" if self._first else ","
            self._first = False
            return sep
        return ""

    def start(self) -> str:
        out = "[" if self.fmt in ("object", "array") else ""
        if not self.header:
            return out
        if self.fmt in ("object", "objectLines"):
            parts = []
            for key, c in zip(self._keys, self.columns, strict=True):
                if not (self.types_header or self.sql_types_header):
                    parts.append(f"{key}:null")
                    continue
                inner = {}
                if self.types_header:
                    inner["type"] = c.native_type
                if self.sql_types_header:
                    inner["sqlType"] = c.sql_type
                parts.append(f"{key}:{orjson.dumps(inner).decode()}")
            obj = "{" + ",".join(parts) + "}"
            return out + self._sep() + obj + ("\n" if self.fmt == "objectLines" else "")
        rows = [[c.name for c in self.columns]]
        if self.types_header:
            rows.append([c.native_type for c in self.columns])
        if self.sql_types_header:
            rows.append([c.sql_type for c in self.columns])
        for row in rows:
            if self.fmt == "csv":
                out += _csv_line(row)
            else:
                out += self._sep() + orjson.dumps(row).decode() + ("\n" if self.fmt == "arrayLines" else "")
        return out

    def rows(self, batch: pa.RecordBatch) -> str:
        cols = [_python_column(batch.column(i), c, self.stringify_arrays, self.tz) for i, c in enumerate(self.columns)]
        parts: list[str] = []
        f32 = self._float32
        if self.fmt in ("object", "objectLines"):
            nl = "\n" if self.fmt == "objectLines" else ""
            keys = self._keys
            for r in range(batch.num_rows):
                body = ",".join(f"{keys[i]}:{_json_value(cols[i][r], f32[i])}" for i in range(len(cols)))
                parts.append(self._sep() + "{" + body + "}" + nl)
        elif self.fmt in ("array", "arrayLines"):
            nl = "\n" if self.fmt == "arrayLines" else ""
            for r in range(batch.num_rows):
                body = ",".join(_json_value(cols[i][r], f32[i]) for i in range(len(cols)))
                parts.append(self._sep() + "[" + body + "]" + nl)
        else:
            for r in range(batch.num_rows):
                parts.append(_csv_line([_text_value(cols[i][r], f32[i]) for i in range(len(cols))]))
        return "".join(parts)

    def end(self) -> str:
        if self.fmt in ("object", "array"):
            return "]\n"
        return "\n"

    def stream(self, batches: Iterable[pa.RecordBatch], on_close: Callable[[], None] | None = None) -> Iterator[bytes]:
        try:
            yield self.start().encode()
            for b in batches:
                if b.num_rows:
                    yield self.rows(b).encode()
            yield self.end().encode()
        finally:
            if on_close is not None:
                on_close()

    def write_all(self, batches: Iterable[pa.RecordBatch]) -> bytes:
        return b"".join(self.stream(batches))
