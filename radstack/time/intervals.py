"""Time instants and intervals, as Druid writes them.

Instants are UTC epoch milliseconds (``int``) everywhere inside radstack; they become ISO-8601 strings
with milliseconds and a ``Z`` (``2012-05-23T00:00:00.000Z``) only at the edges (segment ids, JSON).
An :class:`Interval` is half-open, ``[start, end)``, like Joda's and Druid's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from radstack.user_errors import UserError

MIN_MS = -146136543 * 86_400_000  # Druid's "-146136543-09-08T08:23:32.096Z" rounded to a day
MAX_MS = 146140482 * 86_400_000
# Druid's ETERNITY interval, as millis (JodaUtils.MIN_INSTANT / MAX_INSTANT).
ETERNITY_START = -9223372036854775808 // 2
ETERNITY_END = 9223372036854775807 // 2

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ETERNITY_TEXT = {
    "-146136543-09-08T08:23:32.096Z": ETERNITY_START,
    "146140482-04-24T15:36:27.903Z": ETERNITY_END,
}

_PERIOD_RE = re.compile(
    r"^P(?:(?P<years>\d+)Y)?(?:(?P<months>\d+)M)?(?:(?P<weeks>\d+)W)?(?:(?P<days>\d+)D)?"
    r"(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)


class TimeParseError(ValueError, UserError):
    """An instant, interval or period string that cannot be read."""


def parse_instant(text: str) -> int:
    """ISO-8601 instant (date, date-time, with or without zone; no zone means UTC) → epoch millis."""
    s = text.strip()
    if not s:
        raise TimeParseError("empty timestamp")
    if s in _ETERNITY_TEXT:  # what format_instant writes for Druid's ETERNITY bounds
        return _ETERNITY_TEXT[s]
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    if " " in s and "T" not in s:
        s = s.replace(" ", "T", 1)
    # Joda (Druid) reads a year or a year-month as its first instant: "2000/2100" is an interval
    if re.fullmatch(r"\d{4}", s):
        s += "-01-01"
    elif re.fullmatch(r"\d{4}-\d{2}", s):
        s += "-01"
    # Python's fromisoformat accepts 1-6 fraction digits only from 3.11 on; trim nanos.
    m = re.match(r"^(.*T\d{2}:\d{2}(?::\d{2})?)(\.\d+)?(.*)$", s)
    if m and m.group(2) and len(m.group(2)) > 7:
        s = m.group(1) + m.group(2)[:7] + m.group(3)
    try:
        dt = datetime.fromisoformat(s)
    except ValueError as e:
        raise TimeParseError(f"cannot parse instant {text!r}") from e
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return datetime_to_ms(dt)


def datetime_to_ms(dt: datetime) -> int:
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    delta = dt - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def ms_to_datetime(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)


def format_instant(ms: int) -> str:
    """Epoch millis → ``2012-05-23T00:00:00.000Z`` (Druid's rendering)."""
    if ms <= ETERNITY_START:
        return "-146136543-09-08T08:23:32.096Z"
    if ms >= ETERNITY_END:
        return "146140482-04-24T15:36:27.903Z"
    dt = ms_to_datetime(ms)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


@dataclass(frozen=True)
class Period:
    """An ISO-8601 period (``P1D``, ``PT5M``, ``P1M``): calendar fields kept apart from fixed ones."""

    years: int = 0
    months: int = 0
    weeks: int = 0
    days: int = 0
    hours: int = 0
    minutes: int = 0
    millis: int = 0

    @classmethod
    def parse(cls, text: str) -> Period:
        m = _PERIOD_RE.match(text.strip().upper())
        if not m or text.strip().upper() in ("P", "PT"):
            raise TimeParseError(f"cannot parse period {text!r}")
        g = {k: v for k, v in m.groupdict().items() if v is not None}
        secs = float(g.pop("seconds", 0) or 0)
        return cls(
            years=int(g.get("years", 0)),
            months=int(g.get("months", 0)),
            weeks=int(g.get("weeks", 0)),
            days=int(g.get("days", 0)),
            hours=int(g.get("hours", 0)),
            minutes=int(g.get("minutes", 0)),
            millis=round(secs * 1000),
        )

    @property
    def is_calendar(self) -> bool:
        """True when the length depends on the calendar (months, years)."""
        return bool(self.years or self.months)

    @property
    def fixed_millis(self) -> int:
        """Length in millis, for periods without months or years (days count as 24 h in UTC)."""
        return (
            ((self.weeks * 7 + self.days) * 24 + self.hours) * 60 + self.minutes
        ) * 60_000 + self.millis

    def add_to(self, dt: datetime, times: int = 1) -> datetime:
        """``dt`` plus this period ``times`` times, in ``dt``'s own zone (calendar-aware)."""
        months = (self.years * 12 + self.months) * times
        if months:
            y, mo = divmod(dt.month - 1 + months, 12)
            year, month = dt.year + y, mo + 1
            day = min(dt.day, _days_in_month(year, month))
            dt = dt.replace(year=year, month=month, day=day)
        fixed_days = (self.weeks * 7 + self.days) * times
        if fixed_days:
            # Days are calendar days in the zone (DST-safe): move the wall clock, then re-localize.
            naive = dt.replace(tzinfo=None) + timedelta(days=fixed_days)
            dt = _localize(naive, dt.tzinfo)
        sub = ((self.hours * 60 + self.minutes) * 60_000 + self.millis) * times
        if sub:
            dt = (dt.astimezone(UTC) + timedelta(milliseconds=sub)).astimezone(dt.tzinfo)
        return dt

    def iso(self) -> str:
        out = "P"
        for v, u in ((self.years, "Y"), (self.months, "M"), (self.weeks, "W"), (self.days, "D")):
            if v:
                out += f"{v}{u}"
        t = ""
        if self.hours:
            t += f"{self.hours}H"
        if self.minutes:
            t += f"{self.minutes}M"
        if self.millis:
            secs = self.millis / 1000
            t += f"{int(secs) if secs == int(secs) else secs}S"
        if t:
            out += "T" + t
        return out if out != "P" else "PT0S"


def _days_in_month(year: int, month: int) -> int:
    if month == 12:
        return 31
    return (datetime(year, month + 1, 1) - datetime(year, month, 1)).days


def _localize(naive: datetime, tz) -> datetime:  # type: ignore[no-untyped-def]
    """Attach ``tz`` to a wall-clock time (the earlier of two in a DST fold)."""
    return naive.replace(tzinfo=tz, fold=0)


@dataclass(frozen=True, order=True)
class Interval:
    """Half-open ``[start, end)`` in epoch millis."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise TimeParseError(
                f"interval end {format_instant(self.end)} is before start {format_instant(self.start)}"
            )

    @classmethod
    def parse(cls, text: str) -> Interval:
        """``start/end``, ``start/PERIOD``, ``PERIOD/end`` (ISO-8601), or Druid's ``_`` separator."""
        s = text.strip()
        sep = "/" if "/" in s else "_"
        parts = s.split(sep)
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise TimeParseError(f"cannot parse interval {text!r}: expected START/END")
        a, b = parts
        if a.upper().startswith("P"):
            end = parse_instant(b)
            start = datetime_to_ms(Period.parse(a).add_to(ms_to_datetime(end), -1))
        elif b.upper().startswith("P"):
            start = parse_instant(a)
            end = datetime_to_ms(Period.parse(b).add_to(ms_to_datetime(start)))
        else:
            start, end = parse_instant(a), parse_instant(b)
        return cls(start, end)

    @classmethod
    def eternity(cls) -> Interval:
        return cls(ETERNITY_START, ETERNITY_END)

    def iso(self) -> str:
        return f"{format_instant(self.start)}/{format_instant(self.end)}"

    def __str__(self) -> str:
        return self.iso()

    @property
    def duration_ms(self) -> int:
        return self.end - self.start

    def overlaps(self, other: Interval) -> bool:
        return self.start < other.end and other.start < self.end

    def contains(self, other: Interval) -> bool:
        return self.start <= other.start and other.end <= self.end

    def contains_instant(self, ms: int) -> bool:
        return self.start <= ms < self.end

    def intersect(self, other: Interval) -> Interval | None:
        s, e = max(self.start, other.start), min(self.end, other.end)
        return Interval(s, e) if s < e else None

    def minus(self, other: Interval) -> list[Interval]:
        """The parts of this interval not covered by ``other`` (0, 1 or 2 pieces)."""
        if not self.overlaps(other):
            return [self]
        out = []
        if self.start < other.start:
            out.append(Interval(self.start, other.start))
        if other.end < self.end:
            out.append(Interval(other.end, self.end))
        return out


def condense(intervals: list[Interval]) -> list[Interval]:
    """Sort and merge overlapping or abutting intervals (Druid's JodaUtils.condenseIntervals)."""
    out: list[Interval] = []
    for iv in sorted(intervals):
        if out and iv.start <= out[-1].end:
            if iv.end > out[-1].end:
                out[-1] = Interval(out[-1].start, iv.end)
        else:
            out.append(iv)
    return out
