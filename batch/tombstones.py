"""Druid-style tombstones: a segment with no rows that still overshadows older versions.

A rebuild of an interval that has no events must still hide the real-time segments of that interval
(they may hold only duplicates or junk), so it publishes one tombstone per empty chunk:
``shardSpec {"type": "tombstone", "partitionNum": 0, "partitions": 1}``, ``loadSpec {"type":
"tombstone"}``, no files. The timeline treats a tombstone set as complete and serves nothing from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from radstack.intervals import Interval
from radstack.storage.segments import DataSegment, ShardSpec

__all__ = ["TOMBSTONE_LOAD_SPEC", "tombstone", "empty_chunks", "with_tombstones"]

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
    """``segments`` plus one tombstone for every chunk they leave empty."""
    out = list(segments)
    for c in empty_chunks(chunks, segments):
        out.append(tombstone(data_source, c, version, dimensions=dimensions, metrics=metrics))
    return out
