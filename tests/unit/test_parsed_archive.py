"""The parsed archive (#54): each record's top-level members as typed columns, by kind, and ``parsed``
only where the columns say exactly what the rebuild's JSON reader would read from the bytes."""

from __future__ import annotations

import pyarrow as pa

from realtime.archiver.parsed_fields import MAX_MEMBERS, parse_fields


def parsed(*values: str | None) -> tuple[list[bool], dict[str, list[object]], int]:
    out = parse_fields(pa.array(list(values), pa.string()), "ts")
    return out.parsed.to_pylist(), {k: v.to_pylist() for k, v in out.columns.items()}, out.unparsed


def test_each_value_goes_to_the_column_of_its_kind() -> None:
    ok, cols, unparsed = parsed('{"ts": "2026-01-01", "n": 1, "x": 1.5, "b": true, "s": "é\\n"}',
                                '{"ts": 1700000000000, "n": "one", "x": null, "b": false}',
                                '{"n": -0, "x": 1e8}')
    assert ok == [True, True, True] and unparsed == 0
    assert cols["p:string:ts"] == ["2026-01-01", None, None]
    assert cols["p:long:ts"] == [None, 1700000000000, None]
    assert cols["p:long:n"] == [1, None, 0] and cols["p:string:n"] == [None, "one", None]  # a type change loses nothing
    assert cols["p:double:x"] == [1.5, None, 1e8]
    assert cols["p:bool:b"] == [True, False, None]
    assert cols["p:string:s"] == ["é\n", None, None]
    assert "p:double:n" not in cols  # only the kinds that occur


def test_what_the_columns_cannot_say_exactly_is_not_parsed() -> None:
    ok, _, unparsed = parsed(
        '{"ts": "a", "tags": ["x", "y"]}',  # nested: read raw
        '{"ts": "a", "o": {"k": 1}}',
        '{"ts": "a", "ts": "b"}',  # a repeated member: Jackson keeps the last
        '{"ts": "a", "id": 123456789012345678901234}',  # an integer beyond 64 bits keeps its digits in Spark
        '{"ts": "a", "id": 18446744073709551615}',
        '{"ts": "a", "City": "x", "city": "y"}',  # names equal but for case
        '{"ts": "a", "s": "\\ud800"}',  # a lone surrogate is no UTF-8 text
        '[1, 2]', '"text"', 'not json', None, '{"ts": "a"} trailing',
        '{}', '{"ts": "ok"}')
    assert ok == [False] * 12 + [True, True]
    assert unparsed == 6  # objects that are not parsed; the rest are no JSON objects to DuckDB (a lone surrogate neither)


def test_escapes_and_capitals() -> None:
    ok, cols, _ = parsed('{"ts": "a", "s": "line\\n \\"q\\" \\u00e9 \\/", "City": "B"}')
    assert ok == [True]
    assert cols["p:string:s"] == ['line\n "q" é /']
    assert cols["p:string:^city"] == ["B"]  # Spark resolves Parquet columns without case


def test_valid_json_and_the_timestamp_text_are_as_before() -> None:
    out = parse_fields(pa.array(['{"ts": " 2026-01-01 "}', '[1]', 'x', '{"ts": 5}', '{"a": 1}'], pa.string()), "ts")
    assert out.valid_json.to_pylist() == [True, True, False, True, True]
    assert out.member_text.to_pylist() == ["2026-01-01", None, None, "5", None]


def test_a_flush_with_more_members_than_the_limit_parses_the_common_ones() -> None:
    common = [f'{{"ts": "a", "m{i % 3}": {i}}}' for i in range(10)]
    rare = [f'{{"ts": "a", "r{i}": 1}}' for i in range(MAX_MEMBERS)]
    ok, cols, unparsed = parsed(*common, *rare)
    assert all(ok[:10]) and unparsed == 4  # ts + m0..m2 + the first 252 rare members have columns
    assert len([c for c in cols if c.startswith("p:long:")]) == MAX_MEMBERS - 1
