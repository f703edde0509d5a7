from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pyarrow as pa
import pytest

from radstack.time.intervals import parse_instant
from radstack.time.timestamps import parse_timestamp_column

T = parse_instant("2018-01-01T01:01:35Z")  # 1514768495000


def parse(values: list, fmt: str, typ: pa.DataType | None = None, **kw) -> list:  # type: ignore[type-arg]
    arr = pa.array(values, type=typ) if typ is not None else pa.array(values)
    out = parse_timestamp_column(arr, fmt, **kw)
    assert out.type == pa.int64()
    return out.to_pylist()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2018-01-01T01:01:35Z", T),
        ("2018-01-01T01:01:35.250Z", T + 250),
        ("2018-01-01T01:01:35.123456789Z", T + 123),
        ("2018-01-01T02:01:35+01:00", T),
        ("2018-01-01T02:01:35+0100", T),
        ("2017-12-31T17:01:35-08:00", T),
        ("2018-01-01T01:01:35", T),  # no zone: UTC
        ("2018-01-01", parse_instant("2018-01-01")),
        ("2018-01-01T01", parse_instant("2018-01-01T01:00:00Z")),
        ("2018-01-01T01:01", parse_instant("2018-01-01T01:01:00Z")),
        ("2018-03", parse_instant("2018-03-01")),
        ("2018", parse_instant("2018-01-01")),
        ("  2018-01-01T01:01:35Z ", T),
        ("1969-12-31T23:59:59.999Z", -1),
    ],
)
def test_iso(text: str, expected: int) -> None:
    assert parse([text], "iso") == [expected]


@pytest.mark.parametrize("bad", ["garbage", "", "2018-13-01", "2018-01-32", "infinity", "epoch", "01/02/2018"])
def test_iso_unparseable_is_null(bad: str) -> None:
    assert parse([bad, "2018-01-01T01:01:35Z"], "iso") == [None, T]


def test_iso_keeps_order_and_nulls() -> None:
    vals = ["2018-01-01T00:00:00Z", None, "bad", "2018-01-02T00:00:00Z"] * 1000
    out = parse(vals, "iso")
    assert out[:4] == [parse_instant("2018-01-01"), None, None, parse_instant("2018-01-02")]
    assert out == out[:4] * 1000


def test_auto_accepts_millis_strings_and_iso() -> None:
    assert parse([str(T), "2018-01-01T01:01:35Z", "x"], "auto") == [T, T, None]


def test_numbers_are_millis_for_iso_auto_and_joda() -> None:
    for fmt in ("auto", "iso", "millis", "yyyy-MM-dd"):
        assert parse([T, None], fmt) == [T, None]
    assert parse([float(T) + 0.9], "auto") == [T]


@pytest.mark.parametrize(
    ("fmt", "value", "expected"),
    [
        ("posix", T // 1000, T),
        ("posix", T / 1000 + 0.999, T),  # Java longValue() truncates
        ("micro", T * 1000 + 999, T),
        ("nano", T * 1_000_000 + 999_999, T),
        ("ruby", T / 1000 + 0.25, T + 250),
        ("millis", T, T),
    ],
)
def test_numeric_units(fmt: str, value: float, expected: int) -> None:
    assert parse([value], fmt) == [expected]


@pytest.mark.parametrize(
    ("fmt", "text", "expected"),
    [
        ("posix", str(T // 1000), T),
        ("millis", str(T), T),
        ("micro", str(T * 1000), T),
        ("nano", str(T * 1_000_000), T),
        ("ruby", "1514768495.5", T + 500),
        ("posix", "1514768495.5", None),  # Long.parseLong fails
        ("millis", "abc", None),
        ("posix", "", None),
    ],
)
def test_numeric_strings(fmt: str, text: str, expected: int | None) -> None:
    assert parse([text], fmt) == [expected]


def test_nan_and_infinity_are_unparseable() -> None:
    assert parse([float("nan"), float("inf"), 1.0], "millis") == [None, None, 1]


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        ("yyyy-MM-dd HH:mm:ss", "2018-01-01 01:01:35", T),
        ("dd/MM/yyyy HH:mm:ss.SSS", "01/01/2018 01:01:35.250", T + 250),
        ("yyyyMMdd", "20180101", parse_instant("2018-01-01")),
        ("yyyy-MM-dd'T'HH:mm:ssZ", "2018-01-01T02:01:35+0100", T),
        ("yyyy-MM-dd HH:mm:ss", "2018-01-01T01:01:35Z", None),
    ],
)
def test_joda_patterns(pattern: str, text: str, expected: int | None) -> None:
    assert parse([text], pattern) == [expected]


def test_arrow_timestamps_any_unit_and_zone() -> None:
    dt = datetime(2018, 1, 1, 1, 1, 35, 250_999, tzinfo=UTC)
    assert parse([dt], "auto", pa.timestamp("us", tz="UTC")) == [T + 250]
    assert parse([dt], "iso", pa.timestamp("ns")) == [T + 250]
    assert parse([dt.replace(microsecond=0)], "iso", pa.timestamp("s")) == [T]
    assert parse([dt.replace(microsecond=250_000)], "iso", pa.timestamp("ms")) == [T + 250]
    # zone-aware values are instants whatever their display zone
    berlin = dt.astimezone(timezone(timedelta(hours=1)))
    assert parse([berlin], "auto", pa.timestamp("us", tz="Europe/Berlin")) == [T + 250]
    # before the epoch: floor, not truncation
    assert parse([datetime(1969, 12, 31, 23, 59, 59, 999_500)], "auto", pa.timestamp("us")) == [-1]


def test_dates() -> None:
    assert parse([date(2018, 1, 1), None], "auto", pa.date32()) == [parse_instant("2018-01-01"), None]


def test_dictionary_and_chunked_input() -> None:
    dict_arr = pa.array(["2018-01-01T01:01:35Z", "x", "2018-01-01T01:01:35Z"]).dictionary_encode()
    assert parse_timestamp_column(dict_arr, "iso").to_pylist() == [T, None, T]
    chunked = pa.chunked_array([["2018-01-01T01:01:35Z"], [None, "2018-01-01T01:01:36Z"]])
    assert parse_timestamp_column(chunked, "iso").to_pylist() == [T, None, T + 1000]


def test_missing_value_replaces_nulls_only() -> None:
    mv = parse_instant("2010-01-01")
    assert parse([None, "bad", "2018-01-01T01:01:35Z"], "iso", missing_value=mv) == [mv, None, T]
    assert parse([None, T], "millis", pa.int64(), missing_value=mv) == [mv, T]


def test_all_null_column() -> None:
    assert parse_timestamp_column(pa.nulls(3), "iso").to_pylist() == [None, None, None]


def test_joda_letters_without_strptime_code_still_parse() -> None:
    # 'k' (hour 1-24) has no DuckDB strptime code: parsed per distinct value instead.
    assert parse(["2018-01-01 01:01:35", "bad", None, "2018-01-01 01:01:35"], "yyyy-MM-dd kk:mm:ss") == [T, None, None, T]
