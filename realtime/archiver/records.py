"""The archived record: the original bytes plus every Kafka coordinate, and its event time.

Nothing is parsed away: ``value`` is the record's exact bytes (valid JSON or not), with ``key`` and
``headers``. The event time comes from the event's timestamp field; when that cannot be read (not
JSON, no field, unparseable) the Kafka timestamp stands in and ``event_time_from_kafka`` is true.
Parsing is vectorised (DuckDB's JSON functions over the whole flush), so the per-record Python cost
is only collecting the fields from the consumer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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


@dataclass
class ColumnBuffer:
    """Records of one Kafka partition collected column-wise, in offset order."""

    topic: str
    partition: int
    offsets: list[int] = field(default_factory=list)
    kafka_ts: list[int | None] = field(default_factory=list)
    ts_types: list[int] = field(default_factory=list)
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    headers: list[list[tuple[str, bytes | None]] | None] = field(default_factory=list)
    nbytes: int = 0

    def __len__(self) -> int:
        return len(self.offsets)

    def append(
        self,
        offset: int,
        kafka_ts: int | None,
        ts_type: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]] | None,
    ) -> None:
        self.offsets.append(offset)
        self.kafka_ts.append(kafka_ts)
        self.ts_types.append(ts_type)
        self.keys.append(key)
        self.values.append(value)
        self.headers.append(headers)
        self.nbytes += (len(value) if value else 0) + (len(key) if key else 0) + 24

    @property
    def first_offset(self) -> int:
        return self.offsets[0]

    @property
    def last_offset(self) -> int:
        return self.offsets[-1]


def to_table(buf: ColumnBuffer, *, timestamp_field: str = "timestamp", timestamp_format: str = "auto") -> pa.Table:
    """Build the archive table of a buffer, event times included."""
    n = len(buf)
    values = pa.array(buf.values, type=pa.binary())
    event_ms, valid_json = extract_event_time(values, timestamp_field, timestamp_format)
    kafka_ms = pa.array(buf.kafka_ts, type=pa.int64())
    from_kafka = pc.is_null(event_ms)
    # Records without a Kafka timestamp (-1 / NOT_AVAILABLE) and no event time fall back to 0 (1970):
    # they stay archived and visible instead of being dropped.
    fallback = pc.fill_null(kafka_ms, 0)
    event = pc.if_else(from_kafka, fallback, event_ms)
    headers = pa.array(
        [[{"key": k, "value": v} for k, v in h] if h else None for h in buf.headers],
        type=SCHEMA.field("headers").type,
    )
    return pa.Table.from_arrays(
        [
            pa.array([buf.topic] * n, pa.string()),
            pa.array([buf.partition] * n, pa.int32()),
            pa.array(buf.offsets, pa.int64()),
            kafka_ms.cast(pa.timestamp("ms")),
            pa.array(buf.ts_types, pa.int8()),
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
            "SELECT coalesce(json_valid(s), false) AS ok, "
            "CASE WHEN json_valid(s) AND json_type(s) = 'OBJECT' "
            f"THEN json_extract_string(s, '{path}') END AS ts FROM v",
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
