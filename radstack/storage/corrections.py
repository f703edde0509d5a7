"""Corrections: how wrong real time was, chunk by chunk, measured at the moment a batch version replaces it.

Before a batch rebuild publishes, :func:`realtime_served` finds, per time chunk, the real-time segments
that serve it *now* (real-time partitions or their handoff, one replica's copy: the one the broker
serves). :func:`corrections` then reads the metric columns of those segments and of the new batch
segments and records, per chunk, both answers — events (the ``count`` metrics) and every numeric metric
(sum, min, max as its aggregator says; sketches are left out) — with the batch job's own counts of why
they differ: the archived events it read for the chunk, the copies its exact dedup dropped and the
events that were invalid or filtered out. The rows go into ``radstack_corrections`` in the publish's
own transaction (:meth:`radstack.storage.metadata.MetadataStore.publish`), so a correction exists
exactly when its swap happened. ``late_recovered`` (events real time never counted) is the positive
part of batch − real time: real time drops an event's late copies as late too, so it never counts one
event twice.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc

from radstack.spec import DatasourceSpec
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.metadata import CorrectionRow, MetadataStore
from radstack.storage.replicas import (
    choose_replicas,
    from_realtime_layer,
    realtime_replicas,
    serve_one_replica,
)
from radstack.storage.segment_format import read_stored_segment
from radstack.storage.segments import DataSegment
from radstack.storage.timeline import VersionedIntervalTimeline
from radstack.time.clock import now_millis
from radstack.time.intervals import Interval

__all__ = ["ChunkCounts", "Answer", "realtime_served", "segments_answer", "corrections"]


@dataclass(frozen=True)
class ChunkCounts:
    """What the batch job counted for one chunk: ``written`` valid, kept rows that reached the writer
    (before the dedup), ``events`` after it; ``raw`` archived events it read (``None``: not counted)."""

    written: int
    events: int
    raw: int | None = None


@dataclass(frozen=True)
class Answer:
    events: int
    metrics: dict[str, float]


def realtime_served(metadata: MetadataStore, datasource: str, chunks: Sequence[Interval], *,
                    streamed: bool = True) -> dict[Interval, list[DataSegment]]:  # fmt: skip
    """Per chunk, the real-time layer's segments that serve it now; a chunk nothing serves maps to ``[]``
    when the datasource is ``streamed`` and real time serves some other chunk of ``chunks`` (real time
    answered nothing there: every event was late or lost). Chunks served by anything else — a batch
    version, a compaction, a tombstone — are left out, and so is everything when real time serves none
    of them (a backfill of history replaces no real time: nothing to record, nothing to count)."""
    if not chunks:
        return {}
    used = metadata.segments(datasource, interval=Interval(chunks[0].start, chunks[-1].end))
    used = serve_one_replica(used, choose_replicas(realtime_replicas(used), metadata.get_state))
    timeline = VersionedIntervalTimeline.from_segments(used, datasource)
    out: dict[Interval, list[DataSegment]] = {}
    for chunk in chunks:
        holders = timeline.lookup(chunk)
        segs = [s for h in holders for s in h.segments if not s.is_tombstone]
        if not holders:
            if streamed:
                out[chunk] = []
        elif segs and all(from_realtime_layer(s) for s in segs):
            out[chunk] = segs
    return out if any(out.values()) else {}


def segments_answer(deep_storage: DeepStorage, spec: DatasourceSpec, segments: Sequence[DataSegment],
                    work_dir: Path) -> Answer:  # fmt: skip
    """Events and numeric metrics over ``segments`` (their metric columns only), each metric combined
    as its aggregator combines; events are the ``count`` metrics (rows when the spec has none)."""
    metrics = [m for m in spec.data_schema.metrics if m.kind in ("count", "sum", "min", "max")]
    counts = [m.name for m in metrics if m.kind == "count"]
    rows = 0
    values: dict[str, float] = {}
    for seg in segments:
        if seg.is_tombstone:
            continue
        table = read_stored_segment(deep_storage, seg, work_dir, [m.name for m in metrics if m.name in seg.metrics])
        rows += table.num_rows
        for m in metrics:
            if m.name not in table.column_names or table.num_rows == 0:
                continue
            col = table.column(m.name)
            if m.kind in ("count", "sum"):
                values[m.name] = values.get(m.name, 0) + (pc.sum(col).as_py() or 0)
            else:
                v = (pc.min if m.kind == "min" else pc.max)(col).as_py()
                if v is not None:
                    old = values.get(m.name)
                    values[m.name] = v if old is None else (min if m.kind == "min" else max)(old, v)
    events = int(sum(values.get(c, 0) for c in counts)) if counts else rows
    return Answer(events, {k: float(v) for k, v in sorted(values.items())})


def corrections(
    deep_storage: DeepStorage,
    spec: DatasourceSpec,
    served: Mapping[Interval, list[DataSegment]],
    published: Sequence[DataSegment],
    counts: Mapping[int, ChunkCounts],
    *,
    dedup_counted: bool = True,
) -> list[CorrectionRow]:
    """One row per chunk of ``served`` (from :func:`realtime_served`, taken before the publish) that
    ``published`` (the batch version's segments, tombstones included) replaces. ``counts``: the batch
    job's :class:`ChunkCounts` by chunk start; ``dedup_counted`` is false when the dedup ran before the
    writer (stream joins), and then duplicates and invalid events cannot be told apart."""
    by_chunk: dict[Interval, list[DataSegment]] = {}
    for s in published:
        by_chunk.setdefault(s.interval, []).append(s)
    out: list[CorrectionRow] = []
    now = now_millis()
    with tempfile.TemporaryDirectory(prefix="radstack-corrections-") as tmp:
        for chunk, rt in sorted(served.items(), key=lambda kv: kv[0].start):
            new = by_chunk.get(chunk)
            if not new or (not rt and all(s.is_tombstone for s in new)):
                continue  # not published here, or nothing on either side
            before = segments_answer(deep_storage, spec, rt, Path(tmp))
            after = segments_answer(deep_storage, spec, new, Path(tmp))
            c = counts.get(chunk.start, ChunkCounts(0, 0))
            raw = c.raw
            out.append(CorrectionRow(
                datasource=spec.name, start=chunk.start, end=chunk.end, version=new[0].version,
                realtime_version=max((s.version for s in rt), default=""), realtime_events=before.events,
                batch_events=after.events, realtime_metrics=before.metrics, batch_metrics=after.metrics,
                raw_events=raw,
                duplicates_removed=c.written - c.events if dedup_counted else None,
                invalid_dropped=raw - c.written if dedup_counted and raw is not None else None,
                created=now,
            ))  # fmt: skip
    return out
