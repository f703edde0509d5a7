"""Real-time replicas: ``streaming.replicas: N`` streaming jobs over the same topics, each publishing its
own complete copy of the real-time segments, of which the broker serves exactly one per datasource.

Each replica has its own Spark checkpoint and Kafka consumer group, its own committed state in the
metadata store (:func:`state_key`) and its own range of partition numbers (:func:`partition_range`), so
the copies never collide: a real-time segment's replica is read from its partition number
(:func:`replica_of`). Replica 0 keeps the single-job names and numbers, so a deployment that adds
replicas keeps its history.

The broker serves, per datasource, the copy of the replica with the most committed Kafka offsets
(:func:`choose_replicas`): when a replica dies its offsets stop and the next refresh serves a replica
that goes on; a replica catching up from its checkpoint is served only once it is ahead. Every copy
holds every event up to its offsets, so switching never loses or double counts an event. Handed-off
and batch segments are shared (newer versions overshadow every replica's real-time segments).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from radstack.storage.segments import DataSegment
from radstack.time.intervals import format_instant

__all__ = [
    "MAX_REPLICAS",
    "choose_replicas",
    "committed_total",
    "is_realtime_segment",
    "from_realtime_layer",
    "HANDOFF_SUFFIX",
    "partition_range",
    "progress_key",
    "realtime_replicas",
    "replica_of",
    "serve_one_replica",
    "state_key",
]

MAX_REPLICAS = 8
_BASE = 2**30  # replica 0 uses [0, 2^30), as a single streaming job always did
_SPAN = 2**26  # replica r ≥ 1 uses [2^30 + (r−1)·2^26, 2^30 + r·2^26): below Druid's int limit for 8 replicas


def state_key(data_source: str, replica: int = 0) -> str:
    """The metadata-store key of a replica's committed streaming state."""
    return f"streaming.{data_source}" if replica == 0 else f"streaming.{data_source}.replica{replica}"


def progress_key(data_source: str, replica: int = 0) -> str:
    """The metadata-store key of a replica's progress record (what ``radctl status`` shows)."""
    return f"{state_key(data_source, replica)}.progress"


def partition_range(replica: int) -> tuple[int, int]:
    """``[lo, hi)``: the partition numbers a replica's real-time segments use (it wraps back to lo)."""
    if not 0 <= replica < MAX_REPLICAS:
        raise ValueError(f"replica must be 0..{MAX_REPLICAS - 1}, not {replica}")
    if replica == 0:
        return 0, _BASE
    lo = _BASE + (replica - 1) * _SPAN
    return lo, lo + _SPAN


def replica_of(segment: DataSegment) -> int:
    """The replica that wrote a real-time segment (from its partition number)."""
    pn = segment.partition_num
    return 0 if pn < _BASE else 1 + (pn - _BASE) // _SPAN


HANDOFF_SUFFIX = "-handoff"
"""A handoff's version: the real-time version (its interval start) plus this, so it sorts just above it."""


def from_realtime_layer(segment: DataSegment) -> bool:
    """Written by the real-time layer: a real-time partition or the handoff that merged them (a batch or
    compaction version is a later instant, never the interval start)."""
    start = format_instant(segment.interval.start)
    return segment.version in (start, start + HANDOFF_SUFFIX)


def is_realtime_segment(segment: DataSegment) -> bool:
    """A real-time segment: version = its interval start, an append partition (``partitions = 0``)."""
    return segment.version == format_instant(segment.interval.start) and segment.shard_spec.partitions == 0


def committed_total(state: Mapping[str, Any] | None) -> int:
    """The sum of a replica's committed offsets (``{topic: {partition: next offset}}``)."""
    offsets = (state or {}).get("offsets") or {}
    return sum(int(o) for parts in offsets.values() if isinstance(parts, Mapping) for o in parts.values())


def choose_replicas(
    replicas: Mapping[str, Iterable[int]],
    state: Any,
    previous: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Per datasource with real-time segments of more than one replica: the replica to serve — the one
    with the most committed offsets (``state(key)`` reads a committed state); on a tie the one served
    before, else the lowest number."""
    out: dict[str, int] = {}
    for ds, present in replicas.items():
        ids = sorted(set(present))
        if len(ids) < 2:
            continue
        totals = {r: committed_total(state(state_key(ds, r))) for r in ids}
        best = max(totals.values())
        leaders = [r for r in ids if totals[r] == best]
        prev = (previous or {}).get(ds)
        out[ds] = prev if prev in leaders else leaders[0]
    return out


def realtime_replicas(segments: Iterable[DataSegment]) -> dict[str, set[int]]:
    """datasource → the replicas its used real-time segments come from."""
    out: dict[str, set[int]] = {}
    for s in segments:
        if is_realtime_segment(s):
            out.setdefault(s.data_source, set()).add(replica_of(s))
    return out


def serve_one_replica(segments: Iterable[DataSegment], chosen: Mapping[str, int]) -> list[DataSegment]:
    """``segments`` without the real-time segments of replicas other than the chosen one."""
    return [
        s for s in segments
        if s.data_source not in chosen or not is_realtime_segment(s) or replica_of(s) == chosen[s.data_source]
    ]
