"""What the console's Timeline view draws: every segment of a datasource in a time range (used or
not), what kind of producer wrote it, whether it is overshadowed, and which parts of it serve.

Kinds, from the segment's own metadata (docs/segments-and-timeline.md):

- ``tombstone``: ``tombstone`` shard spec (an interval deleted or rebuilt empty);
- ``compacted``: it carries ``lastCompactionState`` (as Druid's compaction writes);
- ``realtime``: ``numbered`` with ``partitions = 0`` — appended partitions, as the streaming job
  writes them (version = interval start); task-API appends have the same shape;
- ``handed-off``: a complete set written by the streaming job's handoff (the small real-time partitions
  of a closed interval merged into one newer version). By shape it looks like a batch set, so the
  handoff marks it with ``lastCompactionState = {"type": "handoff", …}``; without that marker it is
- ``batch``: every other complete set (batch rebuilds, native batch tasks).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from radstack.storage.segments import DataSegment
from radstack.storage.timeline import VersionedIntervalTimeline
from radstack.time.intervals import Interval, format_instant

KINDS = ("realtime", "handed-off", "batch", "compacted", "tombstone")


def segment_kind(segment: DataSegment) -> str:
    """One of :data:`KINDS` for ``segment`` (see the module docstring)."""
    spec = segment.shard_spec
    if spec.is_tombstone:
        return "tombstone"
    state = segment.last_compaction_state
    if isinstance(state, dict) and state:
        return "handed-off" if state.get("type") == "handoff" else "compacted"
    if spec.type == "numbered" and spec.partitions == 0:
        return "realtime"
    return "batch"


def _iso(ms: int) -> str:
    return format_instant(ms)


def timeline_view(data_source: str, rows: Sequence[Any], window: Interval | None = None,
                  context: Sequence[Any] = ()) -> dict[str, Any]:
    """The Timeline view of ``rows`` (``radstack.storage.metadata.SegmentRow``: segment, used, created_date).

    Overshadowing and visibility are computed over the *used* segments, as the broker serves them;
    unused segments are listed with ``used = false`` and never visible. ``window`` clips the visible
    pieces (the segments themselves keep their full intervals). ``context``: further used rows that
    take part in overshadowing but are not listed (those outside the window)."""
    used = [r.segment for r in [*rows, *context] if r.used]
    tl = VersionedIntervalTimeline.from_segments(used, data_source)
    over = tl.overshadowed()
    span = window or _span(r.segment.interval for r in rows)
    visible: dict[str, list[list[str]]] = {}
    served: list[dict[str, Any]] = []
    if span is not None:
        for holder in tl.lookup(span):
            kinds = {segment_kind(s) for s in holder.segments}
            served.append({
                "start": _iso(holder.interval.start), "end": _iso(holder.interval.end),
                "version": holder.version, "kind": _one_kind(kinds),
                "partitions": len(holder.segments), "hasData": holder.has_data,
            })
            for seg in holder.segments:
                visible.setdefault(seg.identifier, []).append(
                    [_iso(holder.interval.start), _iso(holder.interval.end)])
    segments = []
    for r in sorted(rows, key=lambda r: r.segment.id.sort_key()):
        s: DataSegment = r.segment
        spec = s.shard_spec
        segments.append({
            "id": s.identifier,
            "start": _iso(s.interval.start),
            "end": _iso(s.interval.end),
            "version": s.version,
            "partitionNum": spec.partition_num,
            "partitions": spec.partitions,
            "shardType": spec.type,
            "kind": segment_kind(s),
            "used": bool(r.used),
            "overshadowed": bool(r.used and s.identifier in over),
            "visible": visible.get(s.identifier, []),
            "numRows": s.num_rows,
            "size": s.size,
            "created": _iso(r.created_date),
        })
    return {
        "dataSource": data_source,
        "interval": None if span is None else span.iso(),
        "start": None if span is None else _iso(span.start),
        "end": None if span is None else _iso(span.end),
        "segments": segments,
        "served": served,
        "counts": _counts(segments),
    }


def _one_kind(kinds: set[str]) -> str:
    for k in KINDS:
        if k in kinds:
            return k
    return "batch"


def _span(intervals: Iterable[Interval]) -> Interval | None:
    ivs = list(intervals)
    if not ivs:
        return None
    return Interval(min(i.start for i in ivs), max(i.end for i in ivs))


def _counts(segments: list[dict[str, Any]]) -> dict[str, int]:
    out = {"total": len(segments), "used": 0, "unused": 0, "overshadowed": 0, "visible": 0}
    for s in segments:
        out["used" if s["used"] else "unused"] += 1
        out["overshadowed"] += 1 if s["overshadowed"] else 0
        out["visible"] += 1 if s["visible"] else 0
    for k in KINDS:
        out[k] = sum(1 for s in segments if s["kind"] == k)
    return out
