"""parse_events: JSON + validation → valid typed rows and dead letters with reason + original bytes."""

from __future__ import annotations

from typing import Any

import pytest

from radstack.spec import load_datasource_spec


def _spec(fmt: str = "auto", **processing: Any) -> Any:
    return load_datasource_spec({
        "dataSchema": {
            "dataSource": "t",
            "timestampSpec": {"column": "ts", "format": fmt},
            "dimensionsSpec": {"dimensions": ["page", {"name": "n", "type": "long"}]},
            "metricsSpec": [{"type": "count", "name": "count"},
                            {"type": "doubleSum", "name": "price", "fieldName": "price"}],
            "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "minute"},
        },
        "processing": {"topics": ["t"], "eventId": "id", **processing},
    })


def _parse(spark: Any, spec: Any, values: list[bytes]) -> list[dict[str, Any]]:
    from radstack.pipeline.parse import parse_events

    df = spark.createDataFrame([(v, "t", 0, i) for i, v in enumerate(values)],
                               "value binary, topic string, partition int, offset long")
    return [r.asDict() for r in parse_events(df, spec).orderBy("__offset").collect()]


def test_valid_rows_are_typed_and_timestamped(stream_spark: Any) -> None:
    rows = _parse(stream_spark, _spec(), [
        b'{"ts":"2026-01-01T00:00:01.000Z","id":"a","page":"p","n":"12.7","price":1.5}',
        b'{"ts":1767225601000,"id":"b","page":"q","n":3,"price":"2","extra":1}',
        b'{"ts":"2026-01-01T01:00:00+01:00","id":"c"}',
    ])
    assert [r["__reason"] for r in rows] == [None, None, None]
    assert [r["__time"] for r in rows] == [1767225601000, 1767225601000, 1767225600000]
    assert [r["n"] for r in rows] == [12, 3, None]  # decimals truncate toward zero, as the indexer does
    assert [r["price"] for r in rows] == [1.5, 2.0, None]
    assert rows[0]["__raw"] == b'{"ts":"2026-01-01T00:00:01.000Z","id":"a","page":"p","n":"12.7","price":1.5}'


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"", "empty message"),
        (b'{"ts": "2026-01-01", "id": ', "malformed JSON"),
        (b"[1, 2]", "malformed JSON"),
        (b'{"id": "a"}', "missing timestamp field 'ts'"),
        (b'{"ts": "yesterday", "id": "a"}', "unparseable timestamp 'yesterday'"),
        (b'{"ts": "2026-01-01"}', "missing event id field 'id'"),
        (b'{"ts": "2026-01-01", "id": " "}', "missing event id field 'id'"),
        (b'{"ts": "2026-01-01", "id": "a", "price": "cheap"}', "field price: 'cheap' is not a double"),
        (b'{"ts": "2026-01-01", "id": "a", "n": "x"}', "field n: 'x' is not a long"),
    ],
)
def test_invalid_rows_get_a_reason_and_keep_their_bytes(stream_spark: Any, value: bytes, reason: str) -> None:
    from radstack.pipeline.parse import dead_letters, parse_events, valid_events

    df = stream_spark.createDataFrame([(value, "t", 1, 42)], "value binary, topic string, partition int, offset long")
    parsed = parse_events(df, _spec())
    assert valid_events(parsed).count() == 0
    [dead] = dead_letters(parsed).collect()
    assert (dead["__reason"], dead["__raw"], dead["__topic"], dead["__partition"], dead["__offset"]) == (
        reason, value, "t", 1, 42)


def test_required_fields_and_missing_value(stream_spark: Any) -> None:
    spec = _spec(required=["page"])
    rows = _parse(stream_spark, spec, [b'{"ts": "2026-01-01", "id": "a"}', b'{"ts": "2026-01-01", "id": "b", "page": "x"}'])
    assert [r["__reason"] for r in rows] == ["missing required field 'page'", None]


@pytest.mark.parametrize(
    ("fmt", "value", "millis"),
    [
        ("posix", "1767225601", 1767225601000),
        ("millis", "1767225601123", 1767225601123),
        ("micro", "1767225601123456", 1767225601123),
        ("nano", "1767225601123456789", 1767225601123),
        ("ruby", "1767225601.5", 1767225601500),
        ("iso", "2026-01-01", 1767225600000),
        ("auto", "1767225601123", 1767225601123),
        ("yyyy/MM/dd HH:mm", "2026/01/01 00:01", 1767225660000),
    ],
)
def test_timestamp_formats_match_the_indexer(stream_spark: Any, fmt: str, value: str, millis: int) -> None:
    import pyarrow as pa

    from radstack.time.timestamps import parse_timestamp_column

    rows = _parse(stream_spark, _spec(fmt), [b'{"ts": "%s", "id": "a"}' % value.encode()])
    assert rows[0]["__time"] == millis
    assert parse_timestamp_column(pa.array([value]), fmt).to_pylist() == [millis]


_TRICKY = [
    b'{"ts":"2026-01-01T00:00:01.000Z","id":"a","page":"p","n":"12.7","price":1.5}',
    b'  {"ts": "2026-01-01", "id": "b", "page": "lead"}',  # whitespace before the object
    b'{\n  "ts": "2026-01-01",\n  "id": "c"\n}\n',  # pretty-printed
    b'{ "ts": "2026-01-01", "id": "d" }',
    b'\t\r\n{"ts": "2026-01-01", "id": "e"}',
    b'{"ts": "2026-01-01", "id": "f"} trailing text',  # from_json reads the first value only
    b'{"ts": "2026-01-01", "id": "g"}{"ts": "2026-01-02", "id": "h"}',
    b'{"ts": "2026-01-01", "id": "i", "page": {"nested": [1, 2]}, "n": 7}',
    b'{"ts": "2026-01-01", "id": "j", "page": "caf\\u00e9 \xc3\xa9", "id": "j2"}',  # escapes, UTF-8, repeated key
    b'{"ts": "2026-01-01", "id": "k", "page": "bad \xff utf-8"}',
    # more bad UTF-8: a cut multi-byte sequence, an overlong form, a surrogate, a lone continuation byte
    b'{"ts": "2026-01-01", "id": "k2", "page": "\xe2\x82 \xc0\xaf \xed\xa0\x80 \x80"}',
    b'{"ts": "2026-01-01", "id": "l", "price": "NaN", "n": 01}',
    b"{}", b"{ }", b"  { \n }  ", b"[]", b'[{"ts": "2026-01-01", "id": "m"}]', b"null", b'"text"', b"42", b"",
    b"   ", b"\xef\xbb\xbf{\"ts\": \"2026-01-01\", \"id\": \"n\"}", b'{"ts": "2026-01-01", "id": ', b"{'ts': 1}",
]


@pytest.mark.parametrize("missing_value", [None, "2026-01-01T00:00:00Z"])
def test_the_batch_json_reader_gives_what_from_json_gives(stream_spark: Any, missing_value: str | None) -> None:
    """keep_raw=False (the batch layer) parses with Spark's JSON reader over rewritten values: every row
    — valid or not, its fields, time, size and reason — must be what from_json gives."""
    from radstack.pipeline.parse import parse_events

    spec = _spec()
    if missing_value is not None:  # no event id, no timestamp needed: `{}` is a valid event
        spec = load_datasource_spec({
            "dataSchema": {"dataSource": "t", "timestampSpec": {"column": "ts", "missingValue": missing_value},
                           "dimensionsSpec": {"dimensions": ["page"]}, "metricsSpec": [{"type": "count", "name": "count"}],
                           "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "minute"}},
            "processing": {"topics": ["t"]},
        })  # fmt: skip
    df = stream_spark.createDataFrame([(v, "t", 0, i) for i, v in enumerate(_TRICKY)],
                                      "value binary, topic string, partition int, offset long")
    keep = [c for c in parse_events(df, spec, sizes=True).columns if not c.startswith("__") or c in
            ("__time", "__bytes", "__reason")]

    def rows(keep_raw: bool) -> list[tuple[Any, ...]]:
        out = parse_events(df, spec, sizes=True, keep_raw=keep_raw).select(*keep).collect()
        return sorted((tuple(r) for r in out), key=repr)

    slow, fast = rows(True), rows(False)
    assert len(slow) == len(_TRICKY)
    assert fast == slow
    valid = [r for r in slow if r[keep.index("__reason")] is None]
    assert len(valid) == (11 if missing_value is None else 15)  # the empty objects, and {'ts': 1}
