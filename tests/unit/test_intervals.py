import pytest

from radstack.time.intervals import Interval, Period, TimeParseError, condense, format_instant, parse_instant


@pytest.mark.parametrize(
    ("text", "iso"),
    [
        ("2012-05-23", "2012-05-23T00:00:00.000Z"),
        ("2012-05-23T01:02:03Z", "2012-05-23T01:02:03.000Z"),
        ("2012-05-23T01:02:03.046Z", "2012-05-23T01:02:03.046Z"),
        ("2012-05-23T01:02:03.046123456Z", "2012-05-23T01:02:03.046Z"),
        ("2012-05-23T03:02:03+02:00", "2012-05-23T01:02:03.000Z"),
        ("2012-05-23 01:02:03", "2012-05-23T01:02:03.000Z"),
    ],
)
def test_instant_roundtrip(text: str, iso: str) -> None:
    assert format_instant(parse_instant(text)) == iso


def test_bad_instant() -> None:
    with pytest.raises(TimeParseError):
        parse_instant("yesterday")


@pytest.mark.parametrize(
    ("text", "iso"),
    [
        ("2026-11-20/2026-11-21", "2026-11-20T00:00:00.000Z/2026-11-21T00:00:00.000Z"),
        ("2026-11-20/P1D", "2026-11-20T00:00:00.000Z/2026-11-21T00:00:00.000Z"),
        ("P1M/2026-03-31", "2026-02-28T00:00:00.000Z/2026-03-31T00:00:00.000Z"),
        ("2016-06-27_2016-06-28", "2016-06-27T00:00:00.000Z/2016-06-28T00:00:00.000Z"),
        ("2026-01-31/P1M", "2026-01-31T00:00:00.000Z/2026-02-28T00:00:00.000Z"),
    ],
)
def test_interval_parse(text: str, iso: str) -> None:
    assert Interval.parse(text).iso() == iso


def test_interval_end_before_start() -> None:
    with pytest.raises(TimeParseError):
        Interval.parse("2026-11-21/2026-11-20")


def test_interval_algebra() -> None:
    day = Interval.parse("2026-01-01/P1D")
    morning = Interval.parse("2026-01-01T00:00/PT12H")
    assert day.contains(morning) and day.overlaps(morning)
    assert day.minus(morning) == [Interval.parse("2026-01-01T12:00/PT12H")]
    assert day.intersect(Interval.parse("2026-01-02/P1D")) is None
    assert condense([morning, Interval.parse("2026-01-01T12:00/PT12H")]) == [day]


def test_period() -> None:
    assert Period.parse("PT5M").fixed_millis == 300_000
    assert Period.parse("P1W").fixed_millis == 7 * 86_400_000
    assert Period.parse("P3M").is_calendar
    assert Period.parse("P1DT2H").iso() == "P1DT2H"
    with pytest.raises(TimeParseError):
        Period.parse("P")


def test_a_year_or_a_year_month_is_its_first_instant_as_joda_reads_it() -> None:
    """Druid (Joda) reads ``"intervals": ["2000/2100"]`` as the years 2000 to 2100 (#48, held-out kind)."""
    assert format_instant(parse_instant("2000")) == "2000-01-01T00:00:00.000Z"
    assert format_instant(parse_instant("2000-03")) == "2000-03-01T00:00:00.000Z"
    assert format_instant(parse_instant("2000-03-04T05")) == "2000-03-04T05:00:00.000Z"
