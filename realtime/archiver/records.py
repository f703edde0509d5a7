"""The archived record: the original bytes plus every Kafka coordinate, and its event time.

Nothing is parsed away: ``value`` is the record's exact bytes (valid JSON or not), with ``key`` and
``headers``. The event time comes from the event's timestamp field; when that cannot be read (not
JSON, no field, unparseable) the Kafka timestamp stands in and ``event_time_from_kafka`` is true.
Parsing is vectorised (DuckDB's JSON functions over the whole flush), so the per-record Python cost
is only collecting the fields from the consumer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import methodcaller
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from radstack.timestamps import parse_timestamp_column, query_arrow

SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("kafka_timestamp", pa.timestamp("ms"), nullable=True),
        pa.field("timestamp_type", pa.int8(), nullable=False),
        pa.field("key", pa.binary(), nullable=True),
        pa.field("value", pa.binary(), nullable=True),
        pa.field(
            "headers",
            pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])),
            nullable=True,
        ),
        pa.field("event_time", pa.timestamp("ms"), nullable=False),
        pa.field("event_time_from_kafka", pa.bool_(), nullable=False),
        pa.field("valid_json", pa.bool_(), nullable=False),
    ]
)
"""Columns of every raw archive file (Parquet); Spark reads them with ``spark.read.parquet``."""


_VALUE = methodcaller("value")
_TIMESTAMP = methodcaller("timestamp")
_OFFSET = methodcaller("offset")
_KEY = methodcaller("key")
_HEADERS = methodcaller("headers")


@dataclass
class ColumnBuffer:
    """Consumed records of one Kafka partition, in offset order. The consumer's message objects are
    kept as they are; their fields are read with ``map`` over C-level accessors: values and the
    oldest Kafka timestamp when the records arrive (the flush size and the watermark need them), the
    rest at flush time."""

    topic: str
    partition: int
    messages: list[Any] = field(default_factory=list)
    nbytes: int = 0
    min_kafka_ts: int | None = None  # the oldest Kafka timestamp buffered (for the watermark)
    _values: list[bytes | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.messages)

    def extend(self, msgs: list[Any]) -> None:
        self.messages.extend(msgs)
        values = list(map(_VALUE, msgs))
        self._values.extend(values)
        self.nbytes += sum(map(len, filter(None, values))) + 24 * len(msgs)
        stamps = [t for tt, t in map(_TIMESTAMP, msgs) if tt != 0 and t >= 0]
        if stamps:
            low = min(stamps)
            self.min_kafka_ts = low if self.min_kafka_ts is None else min(low, self.min_kafka_ts)

    @property
    def first_offset(self) -> int:
        return int(self.messages[0].offset())

    @property
    def last_offset(self) -> int:
        return int(self.messages[-1].offset())

    @property
    def offsets(self) -> list[int]:
        return list(map(_OFFSET, self.messages))

    def timestamps(self) -> tuple[list[int | None], list[int]]:
        """Kafka timestamps in millis (None where the record has none) and their types."""
        pairs = list(map(_TIMESTAMP, self.messages))
        return [t if tt != 0 and t >= 0 else None for tt, t in pairs], [tt for tt, _ in pairs]

    @property
    def keys(self) -> list[bytes | None]:
        return list(map(_KEY, self.messages))

    @property
    def values(self) -> list[bytes | None]:
        return self._values

    @property
    def headers(self) -> list[list[tuple[str, bytes | None]] | None]:
        return list(map(_HEADERS, self.messages))


def to_table(buf: ColumnBuffer, *, timestamp_field: str = "timestamp", timestamp_format: str = "auto") -> pa.Table:
    """Build the archive table of a buffer, event times included."""
    n = len(buf)
    values = pa.array(buf.values, type=pa.binary())
    event_ms, valid_json = extract_event_time(values, timestamp_field, timestamp_format)
    kafka_ts, ts_types = buf.timestamps()
    kafka_ms = pa.array(kafka_ts, type=pa.int64())
    from_kafka = pc.is_null(event_ms)
    # Records without a Kafka timestamp (-1 / NOT_AVAILABLE) and no event time fall back to 0 (1970):
    # they stay archived and visible instead of being dropped.
    fallback = pc.fill_null(kafka_ms, 0)
    event = pc.if_else(from_kafka, fallback, event_ms)
    hs = buf.headers
    htype = SCHEMA.field("headers").type
    if any(hs):
        headers = pa.array([[{"key": k, "value": v} for k, v in h] if h else None for h in hs], type=htype)
    else:
        headers = pa.nulls(n, htype)
    return pa.Table.from_arrays(
        [
            pa.array([buf.topic] * n, pa.string()),
            pa.array([buf.partition] * n, pa.int32()),
            pa.array(buf.offsets, pa.int64()),
            kafka_ms.cast(pa.timestamp("ms")),
            pa.array(ts_types, pa.int8()),
            pa.array(buf.keys, pa.binary()),
            values,
            headers,
            event.cast(pa.timestamp("ms")),
            from_kafka,
            valid_json,
        ],
        schema=SCHEMA,
    )


def extract_event_time(values: pa.Array, field_name: str, fmt: str) -> tuple[pa.Array, pa.Array]:
    """(event time millis or null, valid_json) for each raw value, vectorised."""
    strings = _as_utf8(values)
    path = "$." + _json_path_part(field_name)
    con = duckdb.connect()
    try:
        con.register("v", pa.table({"s": strings}))
        res = query_arrow(
            con,
            # json_extract_string gives NULL for a document that is not an object: no json_type
            # check (a third parse of every record) is needed
            "SELECT coalesce(json_valid(s), false) AS ok, "
            f"CASE WHEN json_valid(s) THEN json_extract_string(s, '{path}') END AS ts FROM v",
        )
    finally:
        con.close()
    ts = parse_timestamp_column(res.column("ts"), fmt)
    return ts, res.column("ok").combine_chunks()


def _as_utf8(values: pa.Array) -> pa.Array:
    """The values as UTF-8 strings; invalid UTF-8 becomes null (such a record is not JSON)."""
    try:
        return values.cast(pa.string())
    except pa.ArrowInvalid:
        out = []
        for v in values.to_pylist():
            try:
                out.append(v.decode("utf-8") if v is not None else None)
            except UnicodeDecodeError:
                out.append(None)
        return pa.array(out, pa.string())


def _json_path_part(name: str) -> str:
    if name.replace("_", "").isalnum():
        return name
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"').replace("'", "''") + '"'
