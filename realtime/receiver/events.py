"""The events of a request body: one JSON object, a JSON array of objects, or NDJSON, each an object
with a valid event time."""

from __future__ import annotations

from typing import Any

import orjson

from radstack.time.event_time import range_error, timestamp_error


class BadBody(ValueError):
    """The body as a whole is not JSON or NDJSON."""


_INVALID = object()
_MISSING = object()


def parse_events(body: bytes, timestamp_field: str,
                 max_event_bytes: int = 0) -> tuple[list[bytes], list[dict[str, Any]]]:
    """Split and validate a request body: (serialized valid events, rejections with index + reason;
    an event over ``max_event_bytes`` is rejected with ``"tooLarge": true``).

    Raises :class:`BadBody` when the body as a whole is not JSON/NDJSON."""
    values: list[bytes] = []
    rejected: list[dict[str, Any]] = []
    ts = timestamp_field
    dumps = orjson.dumps
    for i, (event, raw) in enumerate(_items(body)):
        if event is _INVALID:
            rejected.append({"index": i, "reason": f"invalid JSON: {raw.decode()}"})  # type: ignore[union-attr]
            continue
        if type(event) is not dict:
            rejected.append({"index": i, "reason": f"not a JSON object (a {_json_type(event)})"})
            continue
        v = event.get(ts, _MISSING)
        if v is _MISSING:
            rejected.append({"index": i, "reason": f"missing timestamp field {ts!r}"})
            continue
        err = range_error(v) if type(v) is int else timestamp_error(v)
        if err is not None:
            rejected.append({"index": i, "reason": err})
            continue
        value = raw if raw is not None else dumps(event)
        if max_event_bytes and len(value) > max_event_bytes:
            rejected.append({"index": i, "tooLarge": True, "reason": (
                f"event is {len(value):,} bytes; the limit is {max_event_bytes:,} "
                "(receiver.max_event_bytes, at most Kafka's message.max.bytes)")})
            continue
        values.append(value)
    return values, rejected


def _items(body: bytes) -> list[tuple[Any, bytes | None]]:
    """(parsed value, its own bytes when it had a line or the whole body) per event of the body."""
    stripped = body.strip()
    if not stripped:
        raise BadBody("empty body: send a JSON object, a JSON array of objects, or NDJSON")
    try:
        doc = orjson.loads(stripped)
        return [(e, None) for e in doc] if isinstance(doc, list) else [(doc, stripped)]
    except orjson.JSONDecodeError as whole_error:
        if b"\n" not in stripped:
            raise BadBody(f"invalid JSON: {whole_error}") from None
    items: list[tuple[Any, bytes | None]] = []
    for line in stripped.split(b"\n"):
        line = line.strip()
        if not line:
            continue
        try:
            items.append((orjson.loads(line), line))
        except orjson.JSONDecodeError as e:
            items.append((_INVALID, str(e).encode()))
    return items


def _json_type(v: Any) -> str:
    return {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}.get(
        type(v), "null" if v is None else type(v).__name__
    )
