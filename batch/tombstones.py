"""Druid-style tombstones: a segment with no rows that still overshadows older versions.

A rebuild of an interval that has no events must still hide the real-time segments of that interval
(they may hold only duplicates or junk), so it publishes tombstones over its empty chunks:
``shardSpec {"type": "tombstone", "partitionNum": 0, "partitions": 1}``, ``loadSpec {"type":
"tombstone"}``, no files. The timeline treats a tombstone set as complete and serves nothing from it.

Consecutive empty chunks share one tombstone (a day of MINUTE chunks with three busy minutes gets at
most four, not 1,437 metadata rows and descriptors), but never across a UTC day boundary, so no
tombstone is longer than the day-sized intervals that compaction, retention and kill work in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from radstack.storage.segments import DataSegment, ShardSpec
from radstack.time.granularity import Granularity
from radstack.time.intervals import Interval

__all__ = ["TOMBSTONE_LOAD_SPEC", "coalesce", "tombstone", "empty_chunks", "with_tombstones"]

TOMBSTONE_LOAD_SPEC = {"type": "tombstone"}


def tombstone(
    data_source: str,
    interval: Interval,
    version: str,
    *,
    dimensions: Sequence[str] = (),
    metrics: Sequence[str] = (),
) -> DataSegment:
    return DataSegment(
        data_source=data_source,
        interval=interval,
        version=version,
        load_spec=dict(TOMBSTONE_LOAD_SPEC),
        dimensions=tuple(dimensions),
        metrics=tuple(metrics),
        shard_spec=ShardSpec("tombstone", 0, 1),
        size=0,
        num_rows=0,
    )


def empty_chunks(chunks: Iterable[Interval], segments: Iterable[DataSegment]) -> list[Interval]:
    """The chunks no segment of ``segments`` covers any part of."""
    segs = list(segments)
    return [c for c in chunks if not any(s.interval.overlaps(c) for s in segs)]


def with_tombstones(
    data_source: str,
    chunks: Iterable[Interval],
    segments: Sequence[DataSegment],
    version: str,
    *,
    dimensions: Sequence[str] = (),
    metrics: Sequence[str] = (),
) -> list[DataSegment]:
    """``segments`` plus tombstones over the chunks they leave empty (see :func:`coalesce`)."""
    out = list(segments)
    for iv in coalesce(empty_chunks(chunks, segments)):
        out.append(tombstone(data_source, iv, version, dimensions=dimensions, metrics=metrics))
    return out


def coalesce(chunks: Iterable[Interval]) -> list[Interval]:
    """Runs of adjacent chunks as one interval each, cut at every UTC day boundary."""
    day = Granularity.parse("day")
    out: list[Interval] = []
    for c in sorted(chunks, key=lambda iv: iv.start):
        last = out[-1] if out else None
        same_day = last is not None and day.bucket_start(last.start) == day.bucket_start(c.end - 1)
        if last is not None and last.end == c.start and same_day:
            out[-1] = Interval(last.start, c.end)
        else:
            out.append(c)
    return out
