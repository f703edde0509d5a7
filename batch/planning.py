"""Planning a rebuild: which segment-granularity chunks an interval covers, and whether they are closed.

An interval is *closed* — safe to rebuild from the raw archive — when both hold:

1. ``end + windowPeriod`` is in the past: no more on-time events for it can arrive (events later than
   the window period are thrown away by the real-time path, but the archiver still keeps them, so a
   rebuild after this point sees every event delivered up to a window period late);
2. the archiver's completeness watermark of every topic the datasource reads has passed
   ``end + windowPeriod``: everything Kafka received before that is in deep storage.

Chunks are the segment-granularity buckets the interval overlaps (the interval is widened to whole
buckets: a batch segment always covers its whole bucket, so rebuilding half a bucket would drop the
other half).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from radstack.pipeline.window import window_millis
from radstack.time.clock import now_millis
from radstack.time.granularity import Granularity
from radstack.time.intervals import Interval, Period, TimeParseError, format_instant
from radstack.user_errors import UserError

__all__ = [
    "BackfillPlanError",
    "NotClosedError",
    "ClosedCheck",
    "parse_interval",
    "plan_chunks",
    "check_closed",
]


class BackfillPlanError(ValueError, UserError):
    """An interval that cannot be planned (bad syntax, empty, too many chunks)."""


class NotClosedError(RuntimeError):
    """An interval that is not closed yet; the message says why (now, watermark)."""

    def __init__(self, checks: list[ClosedCheck]) -> None:
        self.checks = checks
        lines = [c.reason for c in checks if not c.closed]
        if len(lines) > 3:  # a day of minute chunks is 1,440 reasons: the first two and the last
            lines = [*lines[:2], f"… {len(lines) - 3:,} more chunk(s) not closed …", lines[-1]]
        super().__init__(
            "refusing to rebuild intervals that are not closed yet (use --force to rebuild anyway):\n  "
            + "\n  ".join(lines)
        )


@dataclass(frozen=True)
class ClosedCheck:
    interval: Interval
    closed: bool
    reason: str
    watermarks: dict[str, int | None]


MAX_CHUNKS = 10_000


def parse_interval(text: str) -> Interval:
    """An ISO-8601 interval: ``START/END``, ``START/PERIOD`` (``2026-11-20/P1D``) or ``PERIOD/END``."""
    if not isinstance(text, str) or "/" not in text:
        raise BackfillPlanError(
            f"bad interval {text!r}: expected ISO-8601 START/END or START/PERIOD, e.g. 2026-11-20/P1D"
        )
    try:
        iv = Interval.parse(text.strip())
    except (TimeParseError, ValueError) as e:
        raise BackfillPlanError(f"bad interval {text!r}: {e}") from e
    if iv.end <= iv.start:
        raise BackfillPlanError(f"bad interval {text!r}: the end must be after the start")
    return iv


def plan_chunks(interval: Interval, segment_granularity: Granularity) -> list[Interval]:
    """The segment-granularity buckets ``interval`` overlaps, in time order (widened to whole buckets)."""
    if segment_granularity.is_all:
        raise BackfillPlanError("segmentGranularity ALL has no chunks to rebuild one by one")
    out: list[Interval] = []
    for chunk in segment_granularity.iterate(interval):
        out.append(chunk)
        if len(out) > MAX_CHUNKS:
            raise BackfillPlanError(
                f"{interval.iso()} is more than {MAX_CHUNKS} {segment_granularity.to_json()} chunks"
            )
    return out


def check_closed(
    chunk: Interval,
    window_period: Period,
    watermarks: dict[str, int | None],
    *,
    now_ms: int | None = None,
) -> ClosedCheck:
    """Is ``chunk`` closed, given the archiver watermarks of the datasource's topics?"""
    now = now_millis() if now_ms is None else now_ms
    needed = chunk.end + window_millis(window_period)
    wp = window_period.iso()
    if needed > now:
        return ClosedCheck(
            chunk,
            False,
            f"{chunk.iso()}: end + windowPeriod {wp} = {format_instant(needed)} is in the future "
            f"(now {format_instant(now)})",
            watermarks,
        )
    if not watermarks:
        return ClosedCheck(chunk, False, f"{chunk.iso()}: the datasource reads no topics to check", watermarks)
    behind = []
    for topic, wm in sorted(watermarks.items()):
        if wm is None:
            behind.append(f"topic {topic!r} has no archiver watermark (the archiver never ran for it)")
        elif wm < needed:
            behind.append(
                f"archiver watermark of topic {topic!r} is {format_instant(wm)}, behind "
                f"end + windowPeriod {wp} = {format_instant(needed)}"
            )
    if behind:
        return ClosedCheck(chunk, False, f"{chunk.iso()}: " + "; ".join(behind), watermarks)
    return ClosedCheck(chunk, True, f"{chunk.iso()}: closed", watermarks)


def topic_watermarks(topics: Iterable[str], lookup: Callable[[str], int | None]) -> dict[str, int | None]:
    """``{topic: watermark}`` through ``lookup`` (e.g. ``lambda t: archive_watermark(metadata, t)``)."""
    return {t: lookup(t) for t in topics}
