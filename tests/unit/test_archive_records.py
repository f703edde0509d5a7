"""The archiver's record buffer and archive table (realtime.archiver.records): fields read from the
consumer's messages, the oldest Kafka timestamp for the watermark, event times from any raw value."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Message

from radstack.storage.raw_archive import data_key
from radstack.time.intervals import parse_instant
from realtime.archiver.records import SCHEMA, ColumnBuffer, extract_event_time, to_table, write_hour_files


def Msg(offset: int, ts: tuple[int, int], value: bytes | None, headers: Any = None) -> Message:  # noqa: N802
    """A consumed record as confluent-kafka hands it out (a real ``Message``; odd offsets have a key)."""
    return Message(topic="t", partition=0, offset=offset, timestamp=ts, value=value,
                   key=b"k" if offset % 2 else None, headers=headers)


def test_buffer_tracks_size_and_oldest_kafka_timestamp() -> None:
    buf = ColumnBuffer("t", 3)
    buf.extend([Msg(10, (1, 5_000), b'{"timestamp": "2026-01-01T00:00:00Z"}'), Msg(11, (1, 4_000), None)])
    assert buf.min_kafka_ts == 4_000
    assert buf.nbytes == len(b'{"timestamp": "2026-01-01T00:00:00Z"}') + 2 * 24
    # NOT_AVAILABLE (type 0, -1) and mixed types do not count, a later older stamp does
    buf.extend([Msg(12, (0, -1), b"x"), Msg(13, (2, 3_000), b"{}")])
    assert buf.min_kafka_ts == 3_000
    buf.extend([Msg(14, (0, -1), b"y")])
    assert buf.min_kafka_ts == 3_000
    assert (len(buf), buf.first_offset, buf.last_offset) == (5, 10, 14)


def test_archive_table_keeps_every_coordinate() -> None:
    buf = ColumnBuffer("t", 3)
    buf.extend(
        [
            Msg(7, (1, 1_000), b'{"timestamp": "2026-01-01T01:02:03Z", "a": 1}', [("h", b"v")]),
            Msg(8, (0, -1), b"not json"),
            Msg(9, (1, 2_000), None),
        ]
    )
    t = to_table(buf)
    assert t.select(SCHEMA.names).schema == SCHEMA  # the parsed archive's columns follow the raw ones
    assert t.column_names[len(SCHEMA):] == ["parsed", "p:long:a", "p:string:timestamp"]
    assert t.column("parsed").to_pylist() == [True, False, False]
    rows = t.to_pylist()
    assert [r["offset"] for r in rows] == [7, 8, 9]
    assert [r["key"] for r in rows] == [b"k", None, b"k"]
    assert rows[0]["headers"] == [{"key": "h", "value": b"v"}] and rows[1]["headers"] is None
    assert [r["valid_json"] for r in rows] == [True, False, False]
    assert [r["event_time_from_kafka"] for r in rows] == [False, True, True]
    assert int(rows[0]["event_time"].timestamp() * 1000) == parse_instant("2026-01-01T01:02:03Z")
    assert rows[1]["kafka_timestamp"] is None and rows[1]["timestamp_type"] == 0
    assert int(rows[2]["event_time"].timestamp() * 1000) == 2_000  # the Kafka time stands in


def test_event_time_only_from_an_object_field() -> None:
    values = pa.array(
        [
            b'{"timestamp": "2026-01-01T00:00:00Z"}',
            b'[{"timestamp": "2026-01-01T00:00:00Z"}]',  # an array: no field
            b'"2026-01-01T00:00:00Z"',  # a scalar
            b'{"a": {"timestamp": "2026-01-01T00:00:00Z"}}',  # nested: not the top-level field
            b'{"timestamp": 1767225600000}',
            b"{broken",
            b"\xff\xfe",  # not UTF-8
            None,
        ],
        pa.binary(),
    )
    ts, ok = extract_event_time(values, "timestamp", "auto")
    day = parse_instant("2026-01-01T00:00:00Z")
    assert ts.to_pylist() == [day, None, None, None, day, None, None, None]
    assert ok.to_pylist() == [True, True, True, True, True, False, False, False]


def test_buffer_keeps_no_message_objects() -> None:
    """The buffer copies the fields out: the consumer's Message objects (tracked by Python's garbage
    collector) are freed as soon as the consume loop drops them."""
    msgs = [Msg(i, (1, 1_000 + i), b'{"timestamp": 5}') for i in range(3)]
    before = [sys.getrefcount(m) for m in msgs]
    buf = ColumnBuffer("t", 0)
    buf.extend(msgs)
    assert [sys.getrefcount(m) for m in msgs] == before  # nothing in the buffer refers to a message
    assert len(buf) == 3 and buf.min_kafka_ts == 1_000


def test_table_from_many_consumed_batches() -> None:
    buf = ColumnBuffer("t", 1)
    for start in (0, 2, 5):
        buf.extend([Msg(start + i, (1, 9_000 - start - i), f'{{"timestamp": {1000 * (start + i)}}}'.encode())
                    for i in range(2 if start < 5 else 1)])  # fmt: skip
    rows = to_table(buf, timestamp_format="MILLIS").to_pylist()  # named formats are case-insensitive
    assert [r["offset"] for r in rows] == [0, 1, 2, 3, 5]
    assert [int(r["event_time"].timestamp() * 1000) for r in rows] == [0, 1000, 2000, 3000, 5000]
    assert (buf.first_offset, buf.last_offset, buf.min_kafka_ts) == (0, 5, 8_995)


def test_event_time_with_a_joda_pattern() -> None:
    values = pa.array([b'{"ts": "2026/01/02 03:04"}', b'{"ts": "nope"}', b"[]"], pa.binary())
    ts, ok = extract_event_time(values, "ts", "yyyy/MM/dd HH:mm")
    assert ts.to_pylist() == [parse_instant("2026-01-02T03:04:00Z"), None, None]
    assert ok.to_pylist() == [True, True, True]
    # a Joda letter DuckDB's strptime lacks (era): parsed in Python, same answer
    ts, _ = extract_event_time(pa.array([b'{"ts": "AD 2026-01-02"}'], pa.binary()), "ts", "G yyyy-MM-dd")
    assert ts.to_pylist() == [parse_instant("2026-01-02T00:00:00Z")]


def test_one_file_per_floored_event_hour(tmp_path: Path) -> None:
    """Each event hour gets its own file, keyed as the batch reader looks for it; an hour before 1970
    is floored (the hour the event is in), not truncated toward zero."""
    buf = ColumnBuffer("t", 2)
    buf.extend([Msg(0, (1, 1), b'{"timestamp": "1969-12-31T22:30:00Z"}'),
                Msg(1, (1, 1), b'{"timestamp": "2026-01-01T05:10:00Z"}'),
                Msg(2, (1, 1), b'{"timestamp": "2026-01-01T05:50:00Z"}')])  # fmt: skip
    files = write_hour_files(buf, to_table(buf), tmp_path)
    before = parse_instant("1969-12-31T22:00:00Z")
    five = parse_instant("2026-01-01T05:00:00Z")
    assert [k for k, _ in files] == [data_key("t", 2, 0, 2, before), data_key("t", 2, 0, 2, five)]
    assert [pq.read_table(p).column("offset").to_pylist() for _, p in files] == [[0], [1, 2]]


def test_without_the_parsed_columns_the_raw_columns_are_the_same() -> None:
    """``archiver.parsed_columns`` off: the raw columns only, with the same event times and validity."""
    values = [b'{"timestamp": " 2026-01-01T01:02:03Z ", "a": [1]}', b"not json", b'{"timestamp": 1767225600000}',
              b'"2026-01-01"', b'{"a": 1}', b"\xff\xfe"]
    buf = ColumnBuffer("t", 0)
    buf.extend([Msg(i, (1, 5_000), v) for i, v in enumerate(values)])
    with_parsed, raw_only = to_table(buf), to_table(buf, parsed=False)
    assert raw_only.schema == SCHEMA
    assert raw_only.equals(with_parsed.select(SCHEMA.names).cast(SCHEMA))
