"""The archived record: the original bytes plus every Kafka coordinate, and its event time.

Nothing is parsed away: ``value`` is the record's exact bytes (valid JSON or not), with ``key`` and
``headers``. The event time comes from the event's timestamp field; when that cannot be read (not
JSON, no field, unparseable) the Kafka timestamp stands in and ``event_time_from_kafka`` is true.
Parsing is vectorised (DuckDB's JSON functions over the whole flush), so the per-record Python cost
is only collecting the fields from the consumer; the same parse gives the parsed archive's typed
columns, after the raw ones (:mod:`realtime.archiver.parsed_fields`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from confluent_kafka import Message

from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.raw_archive import HOUR_MS, data_key
from radstack.time.timestamps import parse_timestamp_column, query_arrow, string_millis_sql, utc_connection
from realtime.archiver.parsed_fields import archive_columns, json_path_part, parse_fields, sql_string

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
"""The raw columns of every archive file (Parquet); Spark reads them with ``spark.read.parquet``. The
parsed archive's columns follow them (``parsed``, ``p:<kind>:<member>``; they vary by file)."""

_DICTIONARY_COLUMNS = ["topic", "partition", "timestamp_type", "event_time_from_kafka", "valid_json"]


def write_hour_files(
    buf: ColumnBuffer, table: pa.Table, tmp: Path, compression: str = "zstd"
) -> list[tuple[str, Path]]:
    """Write ``table`` (``to_table(buf)``) as one local Parquet file per event hour in ``tmp``; returns
    ``(deep-storage key, local path)`` per hour, oldest first. Event hours are floored (numpy's ``//``):
    an event before 1970 goes to the hour the batch reader looks for it in."""
    ms = table.column("event_time").cast(pa.int64()).to_numpy()
    hour_starts = ms // HOUR_MS * HOUR_MS
    starts = np.unique(hour_starts).tolist()  # sorted
    files: list[tuple[str, Path]] = []
    for hour in starts:
        part = table if len(starts) == 1 else table.filter(pa.array(hour_starts == hour))
        key = data_key(buf.topic, buf.partition, buf.first_offset, buf.last_offset, hour)
        local = tmp / key.replace("/", "_")
        write_parquet(part, local, compression)
        files.append((key, local))
    return files


def archive_values(
    deep_storage: DeepStorage,
    topic: str,
    values: Iterable[bytes],
    *,
    partition: int = 0,
    first_offset: int = 0,
    kafka_ts: int = 0,
    timestamp_field: str = "timestamp",
    per_file: int = 0,
) -> int:
    """Archive ``values`` (raw record bytes, in offset order) as the archiver's flushes of ``per_file``
    records each (all in one without it) would, without Kafka: the same record builder, parse and layout,
    one Parquet file per event hour per flush. For the jobs that train a JVM on generated data
    (:mod:`operations.training_job`) and the tests. Returns the next offset."""
    vals = list(values)
    step = per_file or max(1, len(vals))
    offset = first_offset
    for lo in range(0, len(vals), step):
        buf = ColumnBuffer(topic, partition)
        batch = vals[lo : lo + step]
        buf.extend([Message(topic=topic, partition=partition, offset=offset + i, value=v, timestamp=(1, kafka_ts))
                    for i, v in enumerate(batch)])  # CreateTime  # fmt: skip
        offset += len(batch)
        table = to_table(buf, timestamp_field=timestamp_field)
        with tempfile.TemporaryDirectory(prefix="radstack-archive-") as tmp:
            for key, local in write_hour_files(buf, table, Path(tmp)):
                deep_storage.put_file(local, key)
    return offset


def write_parquet(table: pa.Table, path: str | os.PathLike[str], compression: str = "zstd") -> None:
    """Write archive rows as one Parquet file. Only the few-valued columns are dictionary-encoded: the
    others are mostly distinct per record, and trying a dictionary on them first halved the write
    speed and made the files larger (13.2 vs 11.0 MB per 1 M events in ``bench_archiver.py``)."""
    pq.write_table(table, path, compression=compression, use_dictionary=_DICTIONARY_COLUMNS)


# confluent-kafka's accessors as the method descriptors themselves: ``map(Message.value, msgs)`` calls
# the C function per record, where ``methodcaller("value")`` looks the method up by name and binds it
# first — three to four times the cost per call (bench_archiver.py, docs/benchmarks.md "Archiver")
_VALUE = Message.value
_TIMESTAMP = Message.timestamp
_OFFSET = Message.offset
_KEY = Message.key
_HEADERS = Message.headers
_FIRST = itemgetter(0)
_SECOND = itemgetter(1)


_HEADERS_TYPE = SCHEMA.field("headers").type


@dataclass
class ColumnBuffer:
    """Consumed records of one Kafka partition, in offset order, as Arrow column chunks: each consumed
    batch's fields are read from the message objects when they arrive (``map`` over confluent-kafka's
    C accessors), turned into Arrow arrays, and the objects are let go. Python's garbage collector
    walks every object a full collection can reach: a quarter of a million Message objects kept
    alive per partition cost 1.2 s of a 7.8 s run of 1 M records, and plain lists of the same fields
    3.3 s (a full collection visits every item of a list); an Arrow chunk is one object."""

    topic: str
    partition: int
    chunks: dict[str, list[pa.Array]] = field(default_factory=lambda: {c: [] for c in _BUFFERED})
    count: int = 0
    first_offset: int = -1
    last_offset: int = -1
    nbytes: int = 0
    min_kafka_ts: int | None = None  # the oldest Kafka timestamp buffered (for the watermark)

    def __len__(self) -> int:
        return self.count

    def extend(self, msgs: list[Any]) -> None:
        """Append consumed records (confluent-kafka ``Message`` objects of this partition, in offset order)."""
        if not msgs:
            return
        n = len(msgs)
        values = pa.array(list(map(_VALUE, msgs)), pa.binary())
        first, last = msgs[0].offset(), msgs[-1].offset()
        # a partition's offsets only grow: first..last with n records has no gap, so nothing to read
        offsets = (pa.array(np.arange(first, last + 1, dtype=np.int64)) if last - first == n - 1
                   else pa.array(list(map(_OFFSET, msgs)), pa.int64()))  # fmt: skip
        headers = list(map(_HEADERS, msgs))
        stamps_typed = list(map(_TIMESTAMP, msgs))  # (type, millis) pairs, let go at the end of the call
        types = pa.array(list(map(_FIRST, stamps_typed)), pa.int8())
        stamps = pa.array(list(map(_SECOND, stamps_typed)), pa.int64())
        del stamps_typed
        c = self.chunks
        c["value"].append(values)
        c["offset"].append(offsets)
        c["key"].append(pa.array(list(map(_KEY, msgs)), pa.binary()))
        c["headers"].append(_headers_array(headers) if any(headers) else pa.nulls(n, _HEADERS_TYPE))
        c["timestamp_type"].append(types)
        c["kafka_ts"].append(stamps)
        if self.count == 0:
            self.first_offset = first
        self.last_offset = last
        self.count += n
        self.nbytes += (pc.sum(pc.binary_length(values)).as_py() or 0) + 24 * n
        low = pc.min(kafka_millis(types, stamps)).as_py()  # records without a Kafka time do not count
        if low is not None:
            self.min_kafka_ts = low if self.min_kafka_ts is None else min(low, self.min_kafka_ts)

    def column(self, name: str) -> pa.ChunkedArray:
        """One buffered column (its chunks as they came, not copied into one array)."""
        return pa.chunked_array(self.chunks[name], _BUFFERED[name])


_BUFFERED: dict[str, pa.DataType] = {
    "value": pa.binary(),
    "offset": pa.int64(),
    "key": pa.binary(),
    "headers": _HEADERS_TYPE,
    "timestamp_type": pa.int8(),
    "kafka_ts": pa.int64(),  # as Kafka gives them: -1 when there is none
}


def _headers_array(hs: list[list[tuple[str, bytes | None]] | None]) -> pa.Array:
    return pa.array([[{"key": k, "value": v} for k, v in h] if h else None for h in hs], type=_HEADERS_TYPE)


def kafka_millis(types: pa.Array | pa.ChunkedArray, stamps: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Each record's Kafka time in millis, null where it has none: timestamp type NOT_AVAILABLE (0) or a
    negative stamp (what confluent-kafka's ``Message.timestamp()`` gives then)."""
    return pc.if_else(pc.or_(pc.equal(types, 0), pc.less(stamps, 0)), pa.scalar(None, pa.int64()), stamps)


def to_table(
    buf: ColumnBuffer, *, timestamp_field: str = "timestamp", timestamp_format: str = "auto", parsed: bool = True
) -> pa.Table:
    """Build the archive table of a buffer: the raw records with their event times and, with
    ``parsed``, the parsed archive's columns (:mod:`realtime.archiver.parsed_fields`) after them."""
    n = len(buf)
    values = buf.column("value")
    text = _as_utf8(values)
    fields = parse_fields(text, timestamp_field) if parsed else None
    valid_json, member = (fields.valid_json, fields.member_text) if fields else member_text(text, timestamp_field)
    event_ms = event_millis(member, timestamp_format)
    ts_types = buf.column("timestamp_type")
    kafka_ms = kafka_millis(ts_types, buf.column("kafka_ts"))
    from_kafka = pc.is_null(event_ms)
    # Records without a Kafka timestamp (-1 / NOT_AVAILABLE) and no event time fall back to 0 (1970):
    # they stay archived and visible instead of being dropped.
    event = pc.if_else(from_kafka, pc.fill_null(kafka_ms, 0), event_ms)
    base = [
        pa.repeat(pa.scalar(buf.topic, pa.string()), n),
        pa.repeat(pa.scalar(buf.partition, pa.int32()), n),
        buf.column("offset"),
        kafka_ms.cast(pa.timestamp("ms")),
        ts_types,
        buf.column("key"),
        values,
        buf.column("headers"),
        event.cast(pa.timestamp("ms")),
        from_kafka,
        valid_json,
    ]
    table = pa.Table.from_arrays(base, schema=SCHEMA)
    if fields is not None:
        for name, col in archive_columns(fields):
            table = table.append_column(pa.field(name, col.type, nullable=True), col)
    return table


def extract_event_time(
    values: pa.Array | pa.ChunkedArray, field_name: str, fmt: str
) -> tuple[pa.Array | pa.ChunkedArray, pa.Array | pa.ChunkedArray]:
    """(event time millis or null, valid_json) for each raw value."""
    valid, text = member_text(_as_utf8(values), field_name)
    return event_millis(text, fmt), valid


def member_text(values: pa.Array | pa.ChunkedArray, field_name: str) -> tuple[pa.Array, pa.Array]:
    """(valid_json, the member's trimmed text) of each value — what :func:`parse_fields` gives for
    them, in one DuckDB query of two parses (no typed columns: ``archiver.parsed_columns`` off)."""
    path = sql_string("$." + json_path_part(field_name))
    con = utc_connection()
    try:
        con.register("raw", pa.table({"s": values}))
        # json_extract_string is NULL for a document that is not an object
        res = query_arrow(con, f"SELECT ok, trim(CASE WHEN ok THEN json_extract_string(s, {path}) END) AS s "
                               "FROM (SELECT s, coalesce(json_valid(s), false) AS ok FROM raw)")
    finally:
        con.close()
    return res.column("ok").combine_chunks(), res.column("s").combine_chunks()


def event_millis(text: pa.Array, fmt: str) -> pa.Array:
    """Event-time millis from the timestamp member's (trimmed) text, null where it cannot be read:
    DuckDB for every format but a Joda pattern it cannot read (the indexer's parser takes those)."""
    millis = string_millis_sql(fmt)
    if millis is None:
        return parse_timestamp_column(text, fmt)
    con = utc_connection()
    try:
        con.register("raw", pa.table({"s": text}))
        return query_arrow(con, f"SELECT {millis} AS ms FROM raw").column("ms").combine_chunks()
    finally:
        con.close()


def _as_utf8(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
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
