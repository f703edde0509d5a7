"""Druid's VersionedIntervalTimeline: which segments are visible for which part of time (MVCC).

Segments of one datasource are grouped into *entries*, one per ``(interval, version)``; an entry holds
a partition set. Per instant, the entry with the highest version (string compare, as Druid does)
among the **complete** entries covering it wins. A higher version replaces only the part of an older
entry it overlaps, so a DAY segment v1 under HOUR segments v2 for hours 0–12 is served as v2 for 0–12
and v1 clipped to 12–24.

Completeness (Druid's core partitions): a ``numbered``/``hashed``/``range``/``single`` set with
``partitions = N > 0`` is complete once partitions 0..N−1 are all present (extra appended partitions
≥ N are fine); ``partitions = 0`` (streaming appends), ``linear``, ``none`` and ``tombstone`` sets are
always complete. Tombstones take part like data: they overshadow older versions and are returned by
:meth:`VersionedIntervalTimeline.lookup` so callers can see them (:attr:`TimelineHolder.has_data`).

Two entries with the same version on overlapping but different intervals are an error
(:class:`TimelineConflictError`), as in Druid.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from radstack.storage.segments import DataSegment, SegmentId
from radstack.time.intervals import Interval

# Shard spec types whose `partitions` count is always complete (no core set to wait for).
_ALWAYS_COMPLETE = frozenset({"linear", "none", "tombstone", "numbered_overwrite"})


class TimelineConflictError(ValueError):
    """Two segments with the same version on overlapping but different intervals."""


@dataclass
class _Entry:
    """All partitions of one ``(interval, version)``."""

    interval: Interval
    version: str
    chunks: dict[int, DataSegment] = field(default_factory=dict)

    def is_complete(self) -> bool:
        if not self.chunks:
            return False
        core = 0
        for seg in self.chunks.values():
            spec = seg.shard_spec
            if spec.type in _ALWAYS_COMPLETE:
                continue
            core = max(core, spec.partitions)
        return all(p in self.chunks for p in range(core))

    def sorted_segments(self) -> list[DataSegment]:
        return [self.chunks[p] for p in sorted(self.chunks)]


@dataclass(frozen=True)
class TimelineHolder:
    """One visible piece of the timeline: ``segments`` (a complete partition set of ``version`` whose
    own interval is ``true_interval``) are what to read for ``interval``."""

    interval: Interval
    true_interval: Interval
    version: str
    segments: tuple[DataSegment, ...]

    @property
    def has_data(self) -> bool:
        """False when the set is all tombstones (nothing to scan, but it still hides older data)."""
        return any(not s.is_tombstone for s in self.segments)

    @property
    def data_segments(self) -> list[DataSegment]:
        """The segments with rows (tombstones left out)."""
        return [s for s in self.segments if not s.is_tombstone]


class VisibleSegment(NamedTuple):
    """A segment to scan and the part of its interval that is visible (scan with this clip)."""

    segment: DataSegment
    interval: Interval


class _Piece(NamedTuple):
    start: int
    end: int
    entry: _Entry


class VersionedIntervalTimeline:
    """The timeline of one datasource. Not thread-safe: build one per metadata snapshot, read it from
    any number of threads once built."""

    def __init__(self, data_source: str | None = None) -> None:
        self.data_source = data_source
        self._entries: dict[tuple[Interval, str], _Entry] = {}
        self._by_version: dict[str, list[Interval]] = defaultdict(list)
        self._by_id: dict[str, _Entry] = {}
        # the visible complete timeline (pieces sorted by start, and their starts), built lazily
        self._cache: tuple[list[_Piece], list[int]] | None = None

    # ---- building -------------------------------------------------------------------------------

    @classmethod
    def from_segments(cls, segments: Iterable[DataSegment], data_source: str | None = None) -> VersionedIntervalTimeline:
        tl = cls(data_source)
        for seg in segments:
            tl.add(seg)
        return tl

    def add(self, segment: DataSegment) -> None:
        if self.data_source is None:
            self.data_source = segment.data_source
        elif segment.data_source != self.data_source:
            raise ValueError(
                f"segment {segment.identifier} belongs to {segment.data_source!r}, "
                f"not to this timeline's {self.data_source!r} (use timelines_by_data_source)"
            )
        key = (segment.interval, segment.version)
        entry = self._entries.get(key)
        if entry is None:
            same = self._by_version[segment.version]  # disjoint, sorted by start
            i = bisect.bisect_left(same, segment.interval)
            for other in same[max(i - 1, 0) : i + 1]:
                if other.overlaps(segment.interval):
                    raise TimelineConflictError(
                        f"cannot add {segment.identifier}: it overlaps {other} with the same version "
                        f"{segment.version} (a segment's interval and version must not overlap another's)"
                    )
            entry = _Entry(segment.interval, segment.version)
            self._entries[key] = entry
            same.insert(i, segment.interval)
        old = entry.chunks.get(segment.partition_num)
        if old is not None:
            self._by_id.pop(old.identifier, None)
        entry.chunks[segment.partition_num] = segment
        self._by_id[segment.identifier] = entry
        self._cache = None

    def remove(self, segment_id: str | SegmentId) -> DataSegment | None:
        """Remove one segment; returns it, or None when it was not in the timeline."""
        sid = str(segment_id)
        entry = self._by_id.pop(sid, None)
        if entry is None:
            return None
        removed = None
        for pn, seg in list(entry.chunks.items()):
            if seg.identifier == sid:
                removed = entry.chunks.pop(pn)
        if not entry.chunks:
            del self._entries[(entry.interval, entry.version)]
            self._by_version[entry.version].remove(entry.interval)
            if not self._by_version[entry.version]:
                del self._by_version[entry.version]
        self._cache = None
        return removed

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, segment_id: object) -> bool:
        return str(segment_id) in self._by_id

    def segments(self) -> Iterator[DataSegment]:
        """Every segment added (visible or not)."""
        for entry in self._entries.values():
            yield from entry.chunks.values()

    # ---- the visible (complete) timeline --------------------------------------------------------

    def _visible(self) -> tuple[list[_Piece], list[int]]:
        cached = self._cache
        if cached is not None:
            return cached
        pieces: list[_Piece] = []
        starts: list[int] = []
        complete = [e for e in self._entries.values() if e.is_complete()]
        # Highest version first; each entry takes the parts of its interval nothing higher holds.
        complete.sort(key=lambda e: e.version, reverse=True)
        for entry in complete:
            s, e = entry.interval.start, entry.interval.end
            if s >= e:
                continue
            # Pieces are disjoint and sorted: find those overlapping [s, e).
            i = bisect.bisect_right(starts, s) - 1
            if i < 0 or pieces[i].end <= s:
                i += 1
            cursor = s
            new: list[_Piece] = []
            while i < len(pieces) and pieces[i].start < e:
                p = pieces[i]
                if p.start > cursor:
                    new.append(_Piece(cursor, p.start, entry))
                cursor = max(cursor, p.end)
                i += 1
            if cursor < e:
                new.append(_Piece(cursor, e, entry))
            for piece in new:
                j = bisect.bisect_left(starts, piece.start)
                starts.insert(j, piece.start)
                pieces.insert(j, piece)
        self._cache = (pieces, starts)  # one assignment: concurrent readers see old or new, never a mix
        return self._cache

    def _overlapping(self, interval: Interval) -> Iterator[_Piece]:
        pieces, starts = self._visible()
        i = max(bisect.bisect_right(starts, interval.start) - 1, 0)
        while i < len(pieces) and pieces[i].start < interval.end:
            if pieces[i].end > interval.start:
                yield pieces[i]
            i += 1

    def lookup(self, interval: Interval) -> list[TimelineHolder]:
        """The visible complete partition sets overlapping ``interval``, in time order, each clipped
        to where it is visible within ``interval`` (tombstone sets included; see ``has_data``)."""
        out: list[TimelineHolder] = []
        for p in self._overlapping(interval):
            clip = Interval(max(p.start, interval.start), min(p.end, interval.end))
            if clip.start >= clip.end:
                continue
            out.append(TimelineHolder(clip, p.entry.interval, p.entry.version, tuple(p.entry.sorted_segments())))
        return out

    def visible_segments(self, interval: Interval, *, include_tombstones: bool = False) -> list[VisibleSegment]:
        """Each segment to read for ``interval`` with the clip to apply, in time then partition order.
        A segment split by a higher version appears once per visible piece."""
        out: list[VisibleSegment] = []
        for holder in self.lookup(interval):
            for seg in holder.segments:
                if include_tombstones or not seg.is_tombstone:
                    out.append(VisibleSegment(seg, holder.interval))
        return out

    def visible_intervals(self) -> list[Interval]:
        """The visible pieces of the whole timeline (not merged), in time order."""
        return [Interval(p.start, p.end) for p in self._visible()[0]]

    # ---- overshadowing --------------------------------------------------------------------------

    def _is_overshadowed(self, interval: Interval, version: str) -> bool:
        """True when complete entries of strictly higher versions cover all of ``interval``."""
        if interval.start >= interval.end:
            return False
        cursor = interval.start
        for p in self._overlapping(interval):
            if p.start > cursor or p.entry.version <= version:
                return False
            cursor = p.end
            if cursor >= interval.end:
                return True
        return cursor >= interval.end

    def is_overshadowed(self, segment: DataSegment) -> bool:
        return self._is_overshadowed(segment.interval, segment.version)

    def overshadowed(self) -> set[str]:
        """Ids of segments (in complete or incomplete sets) whose whole interval is covered by
        complete sets of higher versions."""
        out: set[str] = set()
        for entry in self._entries.values():
            if self._is_overshadowed(entry.interval, entry.version):
                out.update(seg.identifier for seg in entry.chunks.values())
        return out

    def overshadowing(self, segment: DataSegment) -> list[DataSegment]:
        """The visible segments that cover ``segment``'s interval (meaningful when it is overshadowed)."""
        seen: dict[str, DataSegment] = {}
        for holder in self.lookup(segment.interval):
            for seg in holder.segments:
                seen.setdefault(seg.identifier, seg)
        return list(seen.values())


def timelines_by_data_source(segments: Iterable[DataSegment]) -> dict[str, VersionedIntervalTimeline]:
    """One timeline per datasource."""
    out: dict[str, VersionedIntervalTimeline] = {}
    for seg in segments:
        tl = out.get(seg.data_source)
        if tl is None:
            tl = out[seg.data_source] = VersionedIntervalTimeline(seg.data_source)
        tl.add(seg)
    return out
