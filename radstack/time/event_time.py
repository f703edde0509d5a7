"""Whether a value can be an event's time as it arrives over HTTP (the receiver's check, before an event
reaches Kafka): epoch millis (a number, or a string of digits) or an ISO-8601 instant, in the years
1970-9999. The reason is the text a rejected event is reported with."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import orjson

from radstack.time.intervals import TimeParseError, parse_instant

__all__ = ["MAX_EVENT_MILLIS", "timestamp_error", "range_error"]

MAX_EVENT_MILLIS = 253_402_300_800_000  # 10000-01-01T00:00:00Z: event times are years 1970-9999


def timestamp_error(value: Any) -> str | None:
    """None when ``value`` is a usable event timestamp (epoch millis or ISO-8601), else the reason."""
    if isinstance(value, bool) or value is None:
        return f"timestamp must be epoch millis or an ISO-8601 string, got {orjson.dumps(value).decode()}"
    if isinstance(value, int):
        return range_error(value)
    if isinstance(value, float):
        return range_error(value) if math.isfinite(value) else "timestamp is not a finite number"
    if isinstance(value, str):
        if value.isascii() and value.isdigit():
            return range_error(int(value) if len(value) <= 20 else MAX_EVENT_MILLIS, value)
        if not value.isascii():
            return f"unparseable timestamp {value[:100]!r}"
        try:  # fast path: what Python parses natively (years 1-9999)
            dt = datetime.fromisoformat(value)
            in_range = dt.year >= 1970 and (dt.tzinfo is None or dt.astimezone(UTC).year >= 1970)
            return None if in_range else range_error(-1, value)
        except ValueError:
            pass
        try:
            return range_error(parse_instant(value), value)
        except (TimeParseError, ValueError, OverflowError):
            return f"unparseable timestamp {value[:100]!r}"
    return f"timestamp must be epoch millis or an ISO-8601 string, got a {type(value).__name__}"


def range_error(millis: float, shown: Any = None) -> str | None:
    if 0 <= millis < MAX_EVENT_MILLIS:
        return None
    text = repr(shown) if shown is not None else (f"{millis:.6g}" if isinstance(millis, float) else str(millis))
    return f"timestamp {text[:40]} is outside the years 1970-9999 (epoch millis 0 to {MAX_EVENT_MILLIS - 1})"
