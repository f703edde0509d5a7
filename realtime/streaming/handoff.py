"""Handoff: once an interval is closed (``end + windowPeriod <= watermark``), its many small
real-time partitions are merged into one segment with a newer version, atomically.

Versions (plain string comparison, as the timeline orders them):

* real-time partitions: ``2026-11-22T10:00:00.000Z`` (the interval start);
* handoff: ``2026-11-22T10:00:00.000Z-handoff`` — the real-time version is a prefix of it, so it
  sorts just above; ``numbered`` with ``partitions = N`` (a complete core set);
* batch: the batch job's start time, e.g. ``2026-11-22T11:05:12.345Z``. A batch job runs only after
  the interval ends, so its version differs from the interval start at some character before the
  ``Z`` and is greater there: it sorts above the handoff version, and batch always wins.

The merge re-indexes the real-time rows with the combining aggregators (``count`` → ``longSum`` of
``count``; sums, mins and maxes of themselves) through the shared indexer, then publishes the new
segment and marks the small ones unused in ONE transaction, so a query sees either the small
partitions or the merged one, never both. An interval that already has a used version above the
handoff version (a batch rebuild) is never handed off.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from radstack.pipeline.indexing import interval_start_version
from radstack.pipeline.window import interval_closed
from radstack.spec import TIME_COLUMN, DatasourceSpec, TimestampSpec
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.indexer import index_partition
from radstack.storage.metadata import MetadataStore
from radstack.storage.publish import publish
from radstack.storage.replicas import HANDOFF_SUFFIX, replica_of
from radstack.storage.segment_format import read_segment_table
from radstack.time.intervals import Interval

__all__ = ["HANDOFF_SUFFIX", "handoff_version", "is_realtime_version", "handoff_closed_intervals", "merge_interval"]

log = logging.getLogger("radstack.streaming.handoff")


def handoff_version(interval: Interval) -> str:
    return interval_start_version(interval) + HANDOFF_SUFFIX


def is_realtime_version(interval: Interval, version: str) -> bool:
    return version == interval_start_version(interval)


def handoff_closed_intervals(
    metadata: MetadataStore,
    deep_storage: DeepStorage,
    spec: DatasourceSpec,
    *,
    watermark_ms: int | None,
    window_ms: int,
    replica: int = 0,
) -> list[Interval]:
    """Hand off every closed interval that still has used real-time partitions; returns them.
    With real-time replicas, the merge reads only ``replica``'s copy (each copy is complete) and retires
    every replica's partitions."""
    if watermark_ms is None:
        return []
    by_interval: dict[Interval, list[Any]] = {}
    for seg in metadata.segments(spec.name, used=True):
        by_interval.setdefault(seg.interval, []).append(seg)
    done: list[Interval] = []
    for interval in sorted(by_interval, key=lambda i: (i.start, i.end)):
        segs = by_interval[interval]
        rt = [s for s in segs if is_realtime_version(interval, s.version)]
        own = [s for s in rt if replica_of(s) == replica]
        if not own or not interval_closed(interval, watermark_ms, window_ms):
            continue
        if merge_interval(metadata, deep_storage, spec, interval, own, retire=rt):
            done.append(interval)
    return done


def merge_interval(metadata: MetadataStore, deep_storage: DeepStorage, spec: DatasourceSpec, interval: Interval,
                   realtime: list[Any], retire: list[Any] | None = None) -> bool:
    """Merge ``realtime`` (the used real-time partitions of ``interval``, one replica's) into the
    handoff version; ``retire`` (default ``realtime``: every replica's) are marked unused with it."""
    hv = handoff_version(interval)
    overlapping = metadata.segments(spec.name, used=True, interval=interval)
    if any(s.version > hv for s in overlapping):
        log.info("%s %s: a newer (batch) version serves it; not handing off", spec.name, interval)
        return False
    ids = [s.identifier for s in (realtime if retire is None else retire)]
    existing = [s for s in overlapping if s.version == hv and s.interval == interval]
    if existing:
        # An earlier handoff already serves this interval: the real-time partitions are overshadowed.
        metadata.mark_unused(ids)
        return True
    tables = []
    with tempfile.TemporaryDirectory(prefix="radstack-handoff-") as tmp:
        for n, s in enumerate(realtime):
            local = Path(tmp) / f"{n}.parquet"
            deep_storage.download(deep_storage.key_for_load_spec(s.load_spec), local)
            tables.append(read_segment_table(local))
    table = pa.concat_tables(tables, promote_options="permissive")
    schema = spec.data_schema
    combining = replace(
        schema,
        timestamp_spec=TimestampSpec(column=TIME_COLUMN, format="millis"),
        metrics=tuple(m.combining() for m in schema.metrics),
        transforms=(),
        transform_filter=None,
    )
    res = index_partition(table, combining, version=hv, deep_storage=deep_storage, shard="core")
    # the marker the timeline API and console tell a handed-off set from a batch one by (same shape)
    marker = {"type": "handoff", "partitionsMerged": len(realtime)}
    segs = [replace(s, metrics=schema.metric_names, last_compaction_state=marker) for s in res.segments]
    publish(metadata, deep_storage, segs, mark_unused_ids=ids)
    log.info("%s %s: handed off %d partitions into %s", spec.name, interval, len(ids), hv)
    return True
