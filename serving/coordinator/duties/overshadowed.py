"""Druid's ``MarkOvershadowedSegmentsAsUnused``: segments whose whole interval is covered by complete sets of
higher versions are marked ``used = false``. It only looks at *published, used* segments, so unpublished
or incomplete data never hides anything; with ``delay_ms`` the overshadowing segments must have been
used for that long first, giving brokers time to switch over before the old version disappears."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable

from radstack.storage.metadata import MetadataStore, SegmentRow
from radstack.storage.timeline import TimelineConflictError, VersionedIntervalTimeline
from radstack.time.clock import now_millis
from serving.coordinator.duties.base import Duty, DutyContext

log = logging.getLogger(__name__)


def _changed_ms(row: SegmentRow) -> int:
    """When the row last became used (publish or mark_used)."""
    return max(row.created_date, row.used_status_last_updated or row.created_date)


def find_overshadowed(rows: Iterable[SegmentRow], *, now_ms: int, delay_ms: int = 0) -> list[str]:
    """Ids among ``rows`` (used segments) that are fully overshadowed, and whose overshadowing
    segments have all been used for at least ``delay_ms``."""
    by_ds: dict[str, list[SegmentRow]] = defaultdict(list)
    for r in rows:
        by_ds[r.segment.data_source].append(r)
    out: list[str] = []
    for ds, ds_rows in sorted(by_ds.items()):
        try:
            tl = VersionedIntervalTimeline.from_segments((r.segment for r in ds_rows), ds)
        except TimelineConflictError as e:
            log.error("datasource %s: timeline conflict, not marking anything unused: %s", ds, e)
            continue
        changed = {r.id: _changed_ms(r) for r in ds_rows}
        for r in ds_rows:
            if not tl.is_overshadowed(r.segment):
                continue
            if delay_ms > 0:
                newest = max((changed[s.identifier] for s in tl.overshadowing(r.segment)), default=now_ms)
                if now_ms - newest < delay_ms:
                    continue
            out.append(r.id)
    return out


def mark_overshadowed_unused(
    metadata: MetadataStore, *, now_ms: int | None = None, delay_ms: int = 0
) -> list[str]:
    """Mark fully overshadowed used segments unused; returns their ids (in Druid's segment order)."""
    now = now_millis() if now_ms is None else now_ms
    ids = find_overshadowed(metadata.segment_rows(used=True), now_ms=now, delay_ms=delay_ms)
    if ids:
        n = metadata.mark_unused(ids)
        log.info("marked %d overshadowed segment(s) unused", n)
    return ids


def _run(ctx: DutyContext) -> list[str]:
    delay_ms = int(float(ctx.settings.coordinator.overshadowed_unused_delay_seconds or 0) * 1000)
    return mark_overshadowed_unused(ctx.metadata, now_ms=ctx.now_ms, delay_ms=delay_ms)


DUTY = Duty("mark_overshadowed_unused", _run)
