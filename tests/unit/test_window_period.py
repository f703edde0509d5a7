"""The window period's fixed length: one rule (radstack.pipeline.window.window_millis) for stream and batch.

Druid applies ``windowPeriod`` with calendar arithmetic; radstack needs one length in millis for the
watermark and for "is this interval closed". It must never be shorter than the calendar period from
any start (else an event still inside Druid's window would be called late), and it should be the
tightest such bound: a month is at most 31 days and a year at most 366, so ``P1Y`` waits 366 days
(the batch planner once used 12 × 31 = 372)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from radstack.pipeline.window import window_millis
from radstack.time.intervals import Period

DAY = 86_400_000


@pytest.mark.parametrize(("text", "days"), [("P1Y", 366), ("P1M", 31), ("P1Y1M", 397), ("P2M", 62), ("P1D", 1)])
def test_calendar_periods_take_their_longest_length(text: str, days: int) -> None:
    assert window_millis(Period.parse(text)) == days * DAY


def test_fixed_periods_are_exact() -> None:
    assert window_millis(Period.parse("PT10M")) == 600_000
    assert window_millis(Period.parse("P1DT2H")) == DAY + 2 * 3_600_000


@pytest.mark.parametrize("text", ["P1Y", "P1M", "P1Y1M", "P3M", "P1MT12H"])
def test_never_shorter_than_the_calendar_from_any_start(text: str) -> None:
    period = Period.parse(text)
    start = datetime(2023, 1, 1, tzinfo=UTC)
    longest = 0
    for d in range(0, 4 * 366, 3):  # starts across leap and common years, every month end included
        t = start + timedelta(days=d)
        longest = max(longest, int((period.add_to(t) - t).total_seconds() * 1000))
    assert window_millis(period) >= longest
    assert window_millis(period) - longest <= 2 * DAY  # and tight: at most the calendar's own slack


def test_batch_planning_uses_the_same_rule() -> None:
    import batch.planning as planning

    assert planning.window_millis is window_millis
