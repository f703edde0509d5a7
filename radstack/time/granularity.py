"""Druid granularities: bucket an instant, step to the next bucket, split an interval.

Accepted forms (Druid's): simple names (``all``, ``none``, ``second`` … ``year``, ``week`` starting on
Monday), ``{"type":"period","period":"P1D","timeZone":"America/Los_Angeles","origin":…}`` and
``{"type":"duration","duration":3600000,"origin":…}``. All arithmetic is in epoch millis; period
granularities truncate in their time zone, so a ``P1D`` bucket in Los Angeles starts at local midnight.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from typing import Any

from radstack.time import joda
from radstack.time.intervals import (
    Interval,
    Period,
    TimeParseError,
    datetime_to_ms,
    format_instant,
    ms_to_datetime,
    parse_instant,
)

SIMPLE_PERIODS: dict[str, str] = {
    "second": "PT1S",
    "minute": "PT1M",
    "five_minute": "PT5M",
    "ten_minute": "PT10M",
    "fifteen_minute": "PT15M",
    "thirty_minute": "PT30M",
    "hour": "PT1H",
    "six_hour": "PT6H",
    "eight_hour": "PT8H",
    "day": "P1D",
    "week": "P1W",
    "month": "P1M",
    "quarter": "P3M",
    "year": "P1Y",
}


class GranularityError(ValueError):
    """A granularity that Druid would not accept."""


@dataclass(frozen=True)
class Granularity:
    """One of ``all``, ``none``, a period (with zone and origin) or a fixed duration."""

    kind: str  # "all" | "none" | "period" | "duration"
    period: Period | None = None
    time_zone: str = "UTC"
    origin: int | None = None
    duration: int | None = None
    name: str | None = None  # the simple name it was given by, if any

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def parse(cls, value: Any) -> Granularity:
        if isinstance(value, Granularity):
            return value
        if value is None:
            raise GranularityError("granularity is missing")
        if isinstance(value, str):
            low = value.strip().lower()
            if low in ("all", "none"):
                return cls(kind=low, name=low)
            if low in SIMPLE_PERIODS:
                return cls(kind="period", period=Period.parse(SIMPLE_PERIODS[low]), name=low)
            if low.upper().startswith("P"):
                try:
                    period = Period.parse(value)
                except TimeParseError as e:
                    raise GranularityError(str(e)) from e
                _check_positive(period)
                return cls(kind="period", period=period)
            raise GranularityError(f"unknown granularity {value!r}")
        if isinstance(value, dict):
            typ = str(value.get("type", "")).lower()
            if typ in ("all", "none"):
                return cls(kind=typ, name=typ)
            if typ in SIMPLE_PERIODS and "period" not in value:
                return cls.parse(typ)
            origin = value.get("origin")
            origin_ms = _origin_ms(origin)
            if typ == "period":
                if "period" not in value:
                    raise GranularityError("period granularity needs 'period'")
                tz = joda.canonical_zone(str(value.get("timeZone") or "UTC"))
                _zone(tz)
                try:
                    period = Period.parse(str(value["period"]))
                except TimeParseError as e:
                    raise GranularityError(str(e)) from e
                _check_positive(period)
                return cls(kind="period", period=period, time_zone=tz, origin=origin_ms)
            if typ == "duration":
                try:
                    dur = int(value["duration"])
                except (KeyError, TypeError, ValueError) as e:
                    raise GranularityError("duration granularity needs an integer 'duration'") from e
                if dur <= 0:
                    raise GranularityError("duration must be positive")
                return cls(kind="duration", duration=dur, origin=origin_ms)
            raise GranularityError(f"unknown granularity type {value.get('type')!r}")
        raise GranularityError(f"cannot read granularity {value!r}")

    # ---- queries --------------------------------------------------------------------------
    @property
    def is_all(self) -> bool:
        return self.kind == "all"

    @property
    def is_none(self) -> bool:
        return self.kind == "none"

    @property
    def zone(self) -> tzinfo:
        return _zone(self.time_zone)

    def to_json(self) -> Any:
        if self.name:
            return self.name if self.kind in ("all", "none") else self.name.upper()
        if self.kind == "duration":
            out: dict[str, Any] = {"type": "duration", "duration": self.duration}
        else:
            assert self.period is not None
            out = {"type": "period", "period": self.period.iso(), "timeZone": self.time_zone}
        if self.origin is not None:

            out["origin"] = format_instant(self.origin)
        return out

    def bucket_start(self, ms: int) -> int:
        """The start of the bucket that holds ``ms``."""
        if self.kind == "none":
            return ms
        if self.kind == "all":
            return Interval.eternity().start
        if self.kind == "duration":
            assert self.duration is not None
            origin = self.origin or 0
            return origin + ((ms - origin) // self.duration) * self.duration
        assert self.period is not None
        return self._period_bucket_start(ms)

    def next_start(self, bucket_start: int) -> int:
        """The start of the bucket after the one starting at ``bucket_start``."""
        if self.kind == "none":
            return bucket_start + 1
        if self.kind == "all":
            return Interval.eternity().end
        if self.kind == "duration":
            assert self.duration is not None
            return bucket_start + self.duration
        assert self.period is not None
        if not self.period.is_calendar and not self.period.weeks and not self.period.days:
            return bucket_start + self.period.fixed_millis
        dt = ms_to_datetime(bucket_start).astimezone(self.zone)
        return datetime_to_ms(self.period.add_to(dt))

    def bucket(self, ms: int) -> Interval:
        start = self.bucket_start(ms)
        return Interval(start, self.next_start(start))

    def iterate(self, interval: Interval) -> Iterator[Interval]:
        """Buckets overlapping ``interval``, in order (the first may start before it)."""
        if self.kind == "all":
            yield interval
            return
        start = self.bucket_start(interval.start)
        while start < interval.end:
            nxt = self.next_start(start)
            yield Interval(start, nxt)
            start = nxt

    def is_aligned(self, interval: Interval) -> bool:
        return self.bucket_start(interval.start) == interval.start and (
            self.bucket_start(interval.end) == interval.end
        )

    def is_finer_than(self, other: Granularity) -> bool:
        """Whether this granularity's buckets are shorter (used to validate query vs segment)."""
        return self.approx_millis() < other.approx_millis()

    def approx_millis(self) -> int:
        if self.kind == "none":
            return 1
        if self.kind == "all":
            return 2**62
        if self.kind == "duration":
            return int(self.duration or 0)
        assert self.period is not None
        p = self.period
        return p.fixed_millis + (p.years * 365 + p.months * 30) * 86_400_000

    # ---- internals ------------------------------------------------------------------------
    def _truncate_local(self, dt: datetime) -> datetime:
        """Druid's PeriodGranularity.truncate: floor the most significant field of the period."""
        assert self.period is not None
        p = self.period
        tz = dt.tzinfo
        if p.years:
            y = dt.year - dt.year % p.years
            return datetime(y, 1, 1, tzinfo=tz)
        if p.months:
            m0 = dt.month - 1
            m0 -= m0 % p.months
            return datetime(dt.year, m0 + 1, 1, tzinfo=tz)
        if p.weeks:
            monday = dt.date() - timedelta(days=dt.weekday())
            if p.weeks > 1:
                week = monday.isocalendar().week - 1
                monday -= timedelta(weeks=week % p.weeks)
            return datetime(monday.year, monday.month, monday.day, tzinfo=tz)
        if p.days:
            d = dt.date()
            if p.days > 1:
                d0 = d.day - 1
                d = d.replace(day=d.day - d0 % p.days)
            return datetime(d.year, d.month, d.day, tzinfo=tz)
        if p.hours:
            return dt.replace(hour=dt.hour - dt.hour % p.hours, minute=0, second=0, microsecond=0)
        if p.minutes:
            return dt.replace(minute=dt.minute - dt.minute % p.minutes, second=0, microsecond=0)
        secs = max(p.millis // 1000, 1)
        if p.millis % 1000 == 0:
            return dt.replace(second=dt.second - dt.second % secs, microsecond=0)
        step = p.millis
        ms = datetime_to_ms(dt)
        return ms_to_datetime((ms // step) * step).astimezone(tz)

    def default_origin(self) -> int:
        """Druid's default origin: 1970-01-01T00:00 on the zone's wall clock."""
        return datetime_to_ms(datetime(1970, 1, 1, tzinfo=self.zone))

    def _period_bucket_start(self, ms: int) -> int:
        """Druid's PeriodGranularity.truncate: a single-field period of one unit floors that field
        in the zone; several units (or an explicit origin) count whole periods from the origin
        (default: local midnight of 1970-01-01); compound periods step from the origin."""
        assert self.period is not None
        p = self.period
        has_origin = self.origin is not None
        origin = self.origin if has_origin else self.default_origin()
        secs, millis = divmod(p.millis, 1000)
        fields = [("years", p.years), ("months", p.months), ("weeks", p.weeks), ("days", p.days),
                  ("hours", p.hours), ("minutes", p.minutes), ("seconds", secs), ("millis", millis)]
        nonzero = [(f, v) for f, v in fields if v]
        if len(nonzero) > 1:  # compound (PT1H30M, P1DT12H …)
            if not p.is_calendar and (self.time_zone == "UTC" or not (p.days or p.weeks)):
                step = p.fixed_millis
                return origin + ((ms - origin) // step) * step
            return self._bucket_from_origin(ms, origin)
        field, n = nonzero[0]
        if field in ("hours", "minutes", "seconds", "millis"):
            if n > 1 or has_origin or field == "millis":
                step = p.fixed_millis
                return origin + ((ms - origin) // step) * step
            if self.time_zone == "UTC":
                step = p.fixed_millis
                return (ms // step) * step
            return datetime_to_ms(self._truncate_local(ms_to_datetime(ms).astimezone(self.zone)))
        if n > 1 or has_origin:
            return self._bucket_from_origin(ms, origin)
        return datetime_to_ms(self._truncate_local(ms_to_datetime(ms).astimezone(self.zone)))

    def _bucket_from_origin(self, ms: int, origin: int) -> int:
        """The last ``origin + k·period`` (calendar-aware, in the zone) that is ≤ ``ms``."""
        assert self.period is not None
        p = self.period
        origin_dt = ms_to_datetime(origin).astimezone(self.zone)
        # Estimate the number of steps, then correct by walking (at most a few iterations).
        n = (ms - origin) // max(self.approx_millis(), 1)
        cur = p.add_to(origin_dt, int(n))
        while datetime_to_ms(cur) > ms:
            n -= 1
            cur = p.add_to(origin_dt, int(n))
        while datetime_to_ms(p.add_to(origin_dt, int(n) + 1)) <= ms:
            n += 1
            cur = p.add_to(origin_dt, int(n))
        return datetime_to_ms(cur)

def _check_positive(period: Period) -> None:
    if not (period.is_calendar or period.fixed_millis > 0):
        raise GranularityError(f"period {period.iso()} must be positive")


def _zone(name: str) -> tzinfo:
    """An IANA id or a fixed offset (``+05:30``), as Joda reads a ``timeZone``."""
    try:
        return joda.zone(name)
    except ValueError as e:
        raise GranularityError(f"unknown time zone {name!r}") from e


def _origin_ms(origin: Any) -> int | None:
    if origin is None:
        return None
    if isinstance(origin, int | float):
        return int(origin)
    try:
        return parse_instant(str(origin))
    except TimeParseError as e:
        raise GranularityError(f"cannot parse origin {origin!r}") from e


ALL = Granularity.parse("all")
NONE = Granularity.parse("none")
