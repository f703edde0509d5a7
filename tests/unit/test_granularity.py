import pytest

from radstack.time.granularity import Granularity, GranularityError
from radstack.time.intervals import Interval, format_instant, parse_instant

T = parse_instant("2026-11-22T10:37:12.345Z")  # a Sunday


@pytest.mark.parametrize(
    ("gran", "start"),
    [
        ("second", "2026-11-22T10:37:12.000Z"),
        ("minute", "2026-11-22T10:37:00.000Z"),
        ("five_minute", "2026-11-22T10:35:00.000Z"),
        ("fifteen_minute", "2026-11-22T10:30:00.000Z"),
        ("hour", "2026-11-22T10:00:00.000Z"),
        ("six_hour", "2026-11-22T06:00:00.000Z"),
        ("eight_hour", "2026-11-22T08:00:00.000Z"),
        ("day", "2026-11-22T00:00:00.000Z"),
        ("week", "2026-11-16T00:00:00.000Z"),
        ("month", "2026-11-01T00:00:00.000Z"),
        ("quarter", "2026-10-01T00:00:00.000Z"),
        ("year", "2026-01-01T00:00:00.000Z"),
        ("none", "2026-11-22T10:37:12.345Z"),
        ({"type": "period", "period": "P1D", "timeZone": "America/Los_Angeles"}, "2026-11-22T08:00:00.000Z"),
        ({"type": "period", "period": "PT1H", "origin": "2026-01-01T00:30:00Z"}, "2026-11-22T10:30:00.000Z"),
        ({"type": "duration", "duration": 7_200_000}, "2026-11-22T10:00:00.000Z"),
        ({"type": "duration", "duration": 3_600_000, "origin": "1970-01-01T00:15:00Z"}, "2026-11-22T10:15:00.000Z"),
    ],
)
def test_bucket_start(gran: object, start: str) -> None:
    assert format_instant(Granularity.parse(gran).bucket_start(T)) == start


def test_period_in_zone_across_dst() -> None:
    g = Granularity.parse({"type": "period", "period": "P1D", "timeZone": "America/Los_Angeles"})
    days = list(g.iterate(Interval.parse("2026-03-08T08:00Z/2026-03-09T07:00Z")))
    assert [d.iso() for d in days] == ["2026-03-08T08:00:00.000Z/2026-03-09T07:00:00.000Z"]  # 23 h


def test_iterate_hours() -> None:
    hours = list(Granularity.parse("hour").iterate(Interval.parse("2026-01-01T00:30/PT2H")))
    assert len(hours) == 3 and hours[0].start == parse_instant("2026-01-01T00:00Z")


@pytest.mark.parametrize("bad", ["fortnight", {"type": "period"}, {"type": "period", "period": "P1D", "timeZone": "Mars/Base"}])
def test_bad_granularity(bad: object) -> None:
    with pytest.raises(GranularityError):
        Granularity.parse(bad)
