"""Joda-Time patterns: pure-Python formatting/parsing, and the DuckDB/Spark translations."""

from __future__ import annotations

import duckdb
import pytest

from radstack.time.joda import (
    ISO_PATTERN,
    format_millis,
    joda_to_spark,
    joda_to_strftime,
    parse_to_millis,
    tokenize,
)

T = 1_000_000_000_123  # 2001-09-09T01:46:40.123Z, a Sunday


def test_format_iso_pattern_utc_and_zone() -> None:
    # Joda prints Z/ZZ as a numeric offset even for UTC (only ISODateTimeFormat prints "Z").
    assert format_millis(T, ISO_PATTERN) == "2001-09-09T01:46:40.123+00:00"
    assert format_millis(T, ISO_PATTERN, "America/Los_Angeles") == "2001-09-08T18:46:40.123-07:00"
    assert format_millis(T, "yyyy-MM-dd'T'HH:mm:ss.SSSZ", "Asia/Kolkata") == "2001-09-09T07:16:40.123+0530"


def test_format_default_is_iso_with_z() -> None:
    assert format_millis(T) == "2001-09-09T01:46:40.123Z"
    assert format_millis(T, None, "Asia/Kolkata") == "2001-09-09T07:16:40.123+05:30"


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("yyyyMMdd", "20010909"),
        ("yy-M-d H:m:s", "01-9-9 1:46:40"),
        ("MMM d, yyyy h:mm a", "Sep 9, 2001 1:46 AM"),
        ("EEEE, MMMM dd", "Sunday, September 09"),
        ("EEE D e", "Sun 252 7"),
        ("'It''s' HH 'o''clock' %", "It's 01 o'clock %"),
        ("SS|S|SSSSSS", "12|1|123000"),
        ("ZZZ z", "UTC UTC"),
        ("hh:mm a", "01:46 AM"),
        ("kk KK", "01 01"),
    ],
)
def test_format_patterns(pattern: str, expected: str) -> None:
    assert format_millis(T, pattern) == expected


def test_format_afternoon_and_zone_id() -> None:
    ms = T + 14 * 3_600_000  # 15:46 UTC
    assert format_millis(ms, "h a ZZZ", "Europe/Paris") == "5 PM Europe/Paris"


@pytest.mark.parametrize("pattern", ["yyyy-qq", "GGGG C", "yyyy'unterminated"])
def test_unsupported_letters_raise(pattern: str) -> None:
    with pytest.raises(ValueError) as e:
        joda_to_strftime(pattern)
    assert ("'q'" in str(e.value)) or ("'C'" in str(e.value)) or ("quote" in str(e.value)) or (
        "'G'" in str(e.value)
    )


def test_tokenize_merges_literals() -> None:
    toks = tokenize("yyyy'-'MM")
    assert [(t.letter, t.count, t.text) for t in toks] == [("y", 4, ""), ("", 0, "-"), ("M", 2, "")]


@pytest.mark.parametrize(
    ("text", "pattern", "tz", "expected"),
    [
        ("2001-09-09T01:46:40.123Z", ISO_PATTERN, "UTC", T),
        ("2001-09-09T03:46:40.123+02:00", ISO_PATTERN, "UTC", T),
        ("2001-09-09T01:46:40.123+0000", "yyyy-MM-dd'T'HH:mm:ss.SSSZ", "UTC", T),
        ("20010909", "yyyyMMdd", "UTC", 999_993_600_000),
        ("20010908", "yyyyMMdd", "America/Los_Angeles", 999_932_400_000),
        ("Sep 9, 2001 1:46 AM", "MMM d, yyyy h:mm a", "UTC", 999_999_960_000),
        ("9 September 2001 1:46 PM", "d MMMM yyyy h:mm a", "UTC", 1_000_043_160_000),
        ("01/09/09", "yy/MM/dd", "UTC", 999_993_600_000),
        ("2001-252", "yyyy-DDD", "UTC", 999_993_600_000),
    ],
)
def test_parse(text: str, pattern: str, tz: str, expected: int) -> None:
    assert parse_to_millis(text, pattern, tz) == expected


@pytest.mark.parametrize(
    ("text", "pattern"),
    [("x", "yyyy"), ("2001-13-01", "yyyy-MM-dd"), ("2001-09-09 junk", "yyyy-MM-dd"), ("", "yyyy")],
)
def test_parse_failures_are_none(text: str, pattern: str) -> None:
    assert parse_to_millis(text, pattern) is None


def test_parse_default_iso() -> None:
    assert parse_to_millis("2001-09-09T01:46:40.123Z") == T
    assert parse_to_millis("2001-09-09 01:46:40.123") == T
    assert parse_to_millis("2001-09-09") == 999_993_600_000
    assert parse_to_millis("2001-09-08", None, "America/Los_Angeles") == 999_932_400_000
    assert parse_to_millis("2001-09-08T18:46:40.123-07:00", None, "Asia/Tokyo") == T
    assert parse_to_millis("not a date") is None


@pytest.mark.parametrize("pattern", ["yyyy-MM-dd HH:mm:ss.SSS", "yyyyMMdd'T'HHmmss", "d MMMM yyyy h:mm a", "yy/M/d EEEE"])
def test_roundtrip(pattern: str) -> None:
    for ms in (0, T, 1_582_934_400_000, 1_700_000_000_000):
        expected = ms
        if "SSS" not in pattern:
            expected = ms - ms % 1000
        if "s" not in pattern.replace("ss", "s") or "ss" not in pattern:
            expected = None
        text = format_millis(ms, pattern)
        parsed = parse_to_millis(text, pattern)
        assert parsed is not None
        assert format_millis(parsed, pattern) == text
        if expected is not None:
            assert parsed == expected


def test_strftime_translation() -> None:
    assert joda_to_strftime(ISO_PATTERN) == "%Y-%m-%dT%H:%M:%S.%g%z"
    assert joda_to_strftime("yy-M-d h:m:s a EEE EEEE MMM MMMM D") == "%y-%-m-%-d %-I:%-M:%-S %p %a %A %b %B %-j"
    assert joda_to_strftime("'100%' yyyy") == "100%% %Y"


@pytest.mark.parametrize(
    "pattern",
    [
        "yyyy-MM-dd HH:mm:ss.SSS",
        "yy-M-d h:m:s a",
        "EEE EEEE MMM MMMM dd D",
        "'week' ww 'of' x, e",
        "'100%' yyyyMMdd",
    ],
)
def test_strftime_agrees_with_python(pattern: str) -> None:
    con = duckdb.connect()
    fmt = joda_to_strftime(pattern)
    for ms in (0, T, 1_582_934_400_000, 1_704_067_199_999, 1_704_153_600_000):
        (got,) = con.execute("SELECT strftime(epoch_ms(?::BIGINT), ?)", [ms, fmt]).fetchone()
        assert got == format_millis(ms, pattern), (pattern, ms)


def test_strptime_agrees_with_python() -> None:
    con = duckdb.connect()
    for pattern in ("yyyy-MM-dd HH:mm:ss.SSS", "yyyyMMdd", "d MMM yyyy h:mm a"):
        fmt = joda_to_strftime(pattern)
        for ms in (T, 1_582_934_400_000):
            text = format_millis(ms, pattern)
            (got,) = con.execute("SELECT epoch_ms(strptime(?, ?))", [text, fmt]).fetchone()
            assert got == parse_to_millis(text, pattern)


def test_spark_translation() -> None:
    assert joda_to_spark(ISO_PATTERN) == "yyyy-MM-dd'T'HH:mm:ss.SSSxxx"
    assert joda_to_spark("yyyyMMdd Z ZZZ") == "yyyyMMdd xx VV"
    assert joda_to_spark("'It''s' EEEE") == "'It''s 'EEEE"
    with pytest.raises(ValueError, match="'x'"):
        joda_to_spark("xxxx-ww")
