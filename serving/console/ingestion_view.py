"""What the console's Datasources and Ingestion views show that Druid's API has no endpoint for.

- :func:`state_entries`: the ``radstack_state`` rows the ingestion processes write (the streaming job
  ``streaming.<datasource>``, the archiver ``archiver.stats.<group>`` and ``archiver.watermark.<topic>``),
  read as they are stored, plus when they were last updated;
- :func:`ingestion_view`: those grouped by process, with the recent tasks and their row counters;
- :func:`datasource_summaries`: per datasource rows, size, segment count, time range, ingestion rate
  and freshness, from the served (used, not overshadowed) segments.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from radstack.storage.metadata import MetadataStore
from radstack.storage.timeline import timelines_by_data_source
from radstack.time.clock import now_millis
from radstack.time.intervals import format_instant
from serving.console.timeline_view import segment_kind
from serving.server_context import ServerContext

RATE_WINDOW_MS = 5 * 60 * 1000
PREFIXES = ("streaming.", "archiver.stats.", "archiver.watermark.")
ROW_COUNTERS = ("processed", "processedBytes", "processedWithError", "thrownAway", "unparseable")



def state_entries(metadata: MetadataStore, prefixes: Sequence[str] = PREFIXES) -> list[dict[str, Any]]:
    """``[{key, value, updated}]`` for the state keys starting with one of ``prefixes``, by key."""
    t = metadata.t_state
    cond = sa.or_(*(t.c.key.startswith(p, autoescape=True) for p in prefixes))
    with metadata.engine.connect() as conn:
        rows = conn.execute(sa.select(t.c.key, t.c.value, t.c.updated).where(cond).order_by(t.c.key)).all()
    out = []
    for key, value, updated in rows:
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = value
        out.append({"key": key, "value": parsed, "updated": updated})
    return out


def _task_counters(report: dict[str, Any] | None) -> dict[str, Any]:
    """Druid's ``ingestionStatsAndErrors`` → ``{rowStats, unparseableSamples, ingestionState}``."""
    payload = ((report or {}).get("ingestionStatsAndErrors") or {}).get("payload") or {}
    stats = (payload.get("rowStats") or {}).get("buildSegments") or {}
    samples = (payload.get("unparseableEvents") or {}).get("buildSegments") or []
    return {
        "ingestionState": payload.get("ingestionState"),
        "rowStats": {k: stats.get(k, 0) for k in ROW_COUNTERS},
        "unparseableSamples": samples[:5],
    }


def task_summaries(ctx: ServerContext, limit: int = 50) -> list[dict[str, Any]]:
    """The newest tasks with status and row counters (live ones from the running task)."""
    out = []
    for row in ctx.metadata.list_tasks(limit=limit):
        live = ctx.task_runner.get(row.id) if ctx.task_runner is not None else None
        report = row.report
        status = row.status
        if live is not None:
            status = "RUNNING"
            try:
                report = live.live_report()
            except Exception:  # noqa: BLE001 - a task finishing right now
                report = row.report
        out.append({
            "id": row.id, "type": row.type, "dataSource": row.datasource, "status": status,
            "createdTime": format_instant(row.created_date), "duration": row.duration_ms,
            "errorMsg": row.error_msg, "startedBy": (row.payload or {}).get("startedBy"), **_task_counters(report),
        })
    return out


def ingestion_view(ctx: ServerContext) -> dict[str, Any]:
    now = now_millis()
    streaming, stats, watermarks = [], [], []
    for e in state_entries(ctx.metadata):
        key = e["key"]
        if key.startswith("streaming."):
            streaming.append({"dataSource": key[len("streaming."):], **e})
        elif key.startswith("archiver.stats."):
            stats.append({"group": key[len("archiver.stats."):], **e})
        else:
            topic = key[len("archiver.watermark."):]
            wm = e["value"].get("watermark") if isinstance(e["value"], dict) else None
            watermarks.append({"topic": topic, **e, "watermark": None if wm is None else format_instant(int(wm)),
                               "behindMs": None if wm is None else max(0, now - int(wm))})
    return {"now": format_instant(now), "streaming": streaming,
            "archiver": {"stats": stats, "watermarks": watermarks}, "tasks": task_summaries(ctx)}


def datasource_summaries(metadata: MetadataStore, now_ms: int | None = None) -> list[dict[str, Any]]:
    """Per datasource: served rows/size/segments, time range, kinds, ingestion rate and freshness.

    ``ingestionRate`` is rows per second published in the last five minutes (by the segments'
    ``created_date``); ``freshnessMs`` is how long ago the newest served segment was published;
    a streaming job's own rate (state ``streaming.<ds>``) is passed through as ``streaming``."""
    now = now_millis() if now_ms is None else now_ms
    rows = metadata.segment_rows(None, used=True)
    by_ds: dict[str, list[Any]] = {}
    for r in rows:
        by_ds.setdefault(r.segment.data_source, []).append(r)
    timelines = timelines_by_data_source(r.segment for r in rows)
    out = []
    for ds in sorted(by_ds):
        over = timelines[ds].overshadowed()
        served = [r for r in by_ds[ds] if r.segment.identifier not in over]
        if not served:
            continue
        recent = sum(r.segment.num_rows for r in by_ds[ds] if now - r.created_date <= RATE_WINDOW_MS)
        newest = max(r.created_date for r in served)
        kinds: dict[str, int] = {}
        for r in served:
            k = segment_kind(r.segment)
            kinds[k] = kinds.get(k, 0) + 1
        streaming = metadata.get_state(f"streaming.{ds}")
        out.append({
            "name": ds,
            "rows": sum(r.segment.num_rows for r in served),
            "size": sum(r.segment.size for r in served),
            "segments": len(served),
            "overshadowed": len(by_ds[ds]) - len(served),
            "minTime": format_instant(min(r.segment.interval.start for r in served)),
            "maxTime": format_instant(max(r.segment.interval.end for r in served)),
            "kinds": kinds,
            "ingestionRate": round(recent / (RATE_WINDOW_MS / 1000), 3),
            "lastPublished": format_instant(newest),
            "freshnessMs": max(0, now - newest),
            "streaming": streaming,
        })
    return out

