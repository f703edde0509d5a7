"""What served a chunk before a rebuild and what serves it now: rows and events (the sum of the count
metric) and versions, for one chunk or a run of them (one metadata query, one read per data segment;
tombstones and chunks without segments cost no deep-storage read)."""

from __future__ import annotations

import bisect
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from batch.backfill.plan import BackfillPlan
from radstack.config import Settings
from radstack.storage.deep_storage import open_deep_storage
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.metadata import MetadataStore
from radstack.storage.segment_format import read_segment_table, segment_data_key
from radstack.storage.supervisors import datasource_catalog
from radstack.storage.timeline import VersionedIntervalTimeline
from radstack.time.intervals import Interval


def _count_metric(spec: Any) -> str | None:
    return next((m.name for m in spec.data_schema.metrics if m.type == "count"), None)


def _segment_times(deep_storage: DeepStorage, seg: Any, count_metric: str | None, tmp: str, i: int) -> tuple[Any, Any]:
    """(``__time`` in ms, events per row) of a data segment's file, as int64 numpy arrays sorted by time."""
    spec = seg.load_spec or {}
    if spec.get("type") == "local" and Path(str(spec.get("path", ""))).is_file():
        path = Path(str(spec["path"]))
    else:
        path = Path(tmp) / f"{i}.parquet"
        try:
            key = deep_storage.key_for_load_spec(spec)
        except Exception:  # noqa: BLE001 - a load spec from elsewhere: the default layout
            key = segment_data_key(seg.id)
        deep_storage.download(key, path)
    cols = ["__time"] + ([count_metric] if count_metric and count_metric in seg.metrics else [])
    t = read_segment_table(path, cols)
    col = t.column("__time")
    if pa.types.is_timestamp(col.type):
        col = pc.cast(pc.cast(col, pa.timestamp("ms"), safe=False), pa.int64())
    ms = np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.int64)
    if len(cols) > 1:
        events = np.asarray(pc.fill_null(t.column(count_metric), 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    else:
        events = np.ones(len(ms), dtype=np.int64)
    order = np.argsort(ms, kind="stable")
    return ms[order], events[order]


def visible(metadata: MetadataStore, datasource: str, chunk: Interval) -> list[tuple[Any, Interval]]:
    """(segment, visible part) pairs serving ``chunk`` now, per the timeline of used segments."""

    tl = VersionedIntervalTimeline.from_segments(metadata.segments(datasource, used=True, interval=chunk), datasource)
    return [(v.segment, v.interval) for v in tl.visible_segments(chunk, include_tombstones=True)]


def chunk_summaries(
    metadata: MetadataStore, deep_storage: DeepStorage, spec: Any, chunks: Sequence[Interval]
) -> list[tuple[int, int, list[str]]]:
    """:func:`chunk_summary` of each of ``chunks`` (time-ordered, not overlapping): one timeline lookup
    over the whole run and one read per visible data segment, split per chunk; tombstones and chunks
    without segments cost no deep-storage read."""

    n = len(chunks)
    if not n:
        return []
    cm = _count_metric(spec)
    rows = [0] * n
    events = [0] * n
    versions: list[set[str]] = [set() for _ in range(n)]
    starts = [c.start for c in chunks]
    pieces = visible(metadata, spec.name, Interval(chunks[0].start, chunks[-1].end))
    with tempfile.TemporaryDirectory(prefix="radstack-summary-") as tmp:
        for k, (seg, part) in enumerate(pieces):
            hit = []
            for i in range(max(0, bisect.bisect_right(starts, part.start) - 1), n):
                if chunks[i].start >= part.end:
                    break
                if chunks[i].end > part.start:
                    hit.append(i)
            if not hit:
                continue
            for i in hit:
                versions[i].add(seg.version)
            if seg.is_tombstone:
                continue
            ms, ev = _segment_times(deep_storage, seg, cm, tmp, k)
            cum = np.concatenate(([0], np.cumsum(ev)))
            for i in hit:
                lo, hi = max(part.start, chunks[i].start), min(part.end, chunks[i].end)
                a, b = (int(x) for x in np.searchsorted(ms, [lo, hi], side="left"))
                rows[i] += b - a
                events[i] += int(cum[b] - cum[a])
    return [(rows[i], events[i], sorted(versions[i])) for i in range(n)]


def chunk_summary(metadata: MetadataStore, deep_storage: DeepStorage, spec: Any, chunk: Interval) -> tuple[int, int, list[str]]:
    """(rows, events, versions) of what serves ``chunk`` now."""
    return chunk_summaries(metadata, deep_storage, spec, [chunk])[0]


# ---- local ---------------------------------------------------------------------------------------


def before_summaries(settings: Settings, plan: BackfillPlan) -> dict[tuple[str, Interval], tuple[int, int, list[str]]]:

    storage = open_deep_storage(settings)
    with MetadataStore.from_settings(settings) as md:
        catalog = datasource_catalog(settings, md)
        return {
            (ds, c): chunk_summary(md, storage, catalog[ds], c) for ds, chunks in plan.chunks.items() for c in chunks
        }


