"""Which intervals each tier compacts next, and which are already compacted."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from radstack.storage.compaction.config import (
    DEFAULT_WINDOW_PERIOD,
    CompactionConfig,
    CompactionTier,
    minus_period,
)
from radstack.storage.segments import DataSegment
from radstack.storage.timeline import VersionedIntervalTimeline, VisibleSegment
from radstack.time.intervals import (
    Interval,
    Period,
)


@dataclass(frozen=True)
class CompactionPlan:
    data_source: str
    interval: Interval
    tier: CompactionTier
    inputs: tuple[VisibleSegment, ...]

    @property
    def input_rows(self) -> int:
        return sum(v.segment.num_rows for v in self.inputs)

    @property
    def input_ids(self) -> tuple[str, ...]:
        return tuple(sorted({v.segment.identifier for v in self.inputs}))

    def to_json(self) -> dict[str, Any]:
        return {
            "dataSource": self.data_source,
            "interval": self.interval.iso(),
            "segmentGranularity": self.tier.segment_granularity.to_json(),
            "queryGranularity": self.tier.query_granularity.to_json(),
            "olderThan": None if self.tier.older_than is None else self.tier.older_than.iso(),
            "inputSegments": len(self.input_ids),
            "inputRows": self.input_rows,
        }


def _already_compacted(holders: Sequence[Any], bucket: Interval, tier: CompactionTier) -> bool:
    if len(holders) != 1:
        return False
    h = holders[0]
    return (
        h.true_interval == bucket
        and h.interval == bucket
        and all(tier.matches(s.last_compaction_state) for s in h.segments)
    )


def plan_compaction(
    segments: Sequence[DataSegment],
    config: CompactionConfig,
    *,
    now_ms: int,
    window_period: Period | None = None,
) -> list[CompactionPlan]:
    """Intervals of ``config.data_source`` to compact now, newest first (Druid's policy), given its
    used ``segments``."""
    segs = [s for s in segments if s.data_source == config.data_source]
    data = [s for s in segs if not s.is_tombstone]
    if not data:
        return []
    tl = VersionedIntervalTimeline.from_segments(segs, config.data_source)
    visible = [iv for iv in tl.visible_intervals()]
    if not visible:
        return []
    lo, hi = min(iv.start for iv in visible), max(iv.end for iv in visible)
    latest_end = max(s.interval.end for s in data)
    skip_end = minus_period(latest_end, config.skip_offset)
    window = Period.parse(DEFAULT_WINDOW_PERIOD) if window_period is None else window_period
    stream_end = minus_period(
        now_ms, window
    )  # a bucket must end at or before this (end + windowPeriod <= now)
    owned: list[Interval] = []  # buckets a coarser (older) tier handles
    plans: list[CompactionPlan] = []
    for tier in config.tiers_oldest_first(now_ms):  # largest olderThan (oldest cutoff) first
        limit = min(tier.cutoff(now_ms), skip_end, stream_end)
        if limit <= lo:
            continue
        for bucket in tier.segment_granularity.iterate(Interval(lo, min(hi, limit))):
            if bucket.end > limit:
                continue
            if any(o.overlaps(bucket) for o in owned):
                continue
            owned.append(bucket)
            holders = [h for h in tl.lookup(bucket) if h.has_data]
            if not holders or _already_compacted(holders, bucket, tier):
                continue
            inputs = tuple(VisibleSegment(s, h.interval) for h in holders for s in h.data_segments)
            plans.append(CompactionPlan(config.data_source, bucket, tier, inputs))
    plans.sort(key=lambda p: p.interval.start, reverse=True)
    return plans
