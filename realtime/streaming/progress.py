"""What Spark reports per micro-batch (``StreamingQueryProgress``), kept for ``radctl status``.

The job polls the query's new progress events (:func:`new_progress`) and writes
``streaming.<ds>.progress``: input and processed rates, batch duration, the Kafka source's end/latest
offsets and lag (offsets behind latest), and running totals of what Spark's stateful operators
dropped (``numDroppedDuplicateRows`` — duplicates — and ``numRowsDroppedByWatermark`` — rows later
than the dedup/join watermark, part of ``thrownAway``). The sink's own counters are in
``streaming.<ds>`` (committed with each batch).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from radstack.config import Settings
from radstack.datasources import load_catalog
from radstack.pipeline.dedup import ENTERED_METRIC_PREFIX, PASSED_METRIC_PREFIX
from radstack.storage.metadata import MetadataStore
from radstack.storage.replicas import MAX_REPLICAS, progress_key, state_key
from radstack.storage.supervisors import load_supervisors
from radstack.time.clock import now_millis
from radstack.time.intervals import format_instant, parse_instant

__all__ = ["ProgressTracker", "new_progress", "lag_from_progress", "status_view"]


def _json(p: Any) -> dict[str, Any]:
    if isinstance(p, dict):
        return p
    j = getattr(p, "json", None)
    if callable(j):

        return json.loads(j())
    return dict(p)


def new_progress(query: Any, tracker: ProgressTracker) -> list[dict[str, Any]]:
    """The query's progress events the tracker has not seen, oldest first, as JSON dicts.

    Read from the end of the JVM's list of recent events back to the first one already seen, one
    ``json()`` call each: PySpark's ``query.recentProgress`` converts all (up to 100) retained events
    field by field over py4j on every call, and those calls make the JVM look classes up in every jar
    — at a poll a second that cost a streaming job ≈ 0.3 of a core (docs/benchmarks.md)."""
    events = query._jsq.recentProgress()
    out: list[dict[str, Any]] = []
    for i in range(len(events) - 1, -1, -1):
        p = json.loads(events[i].json())
        if tracker.key(p) in tracker.seen:
            break
        out.append(p)
    return out[::-1]


def _offsets(raw: Any) -> dict[str, dict[str, int]]:
    if isinstance(raw, str):

        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    if not isinstance(raw, dict):
        return {}
    return {t: {str(p): int(o) for p, o in parts.items()} for t, parts in raw.items() if isinstance(parts, dict)}


def lag_from_progress(p: dict[str, Any]) -> int:
    """Offsets between what the last batch read and the latest offsets Kafka reported."""
    total = 0
    for src in p.get("sources") or []:
        end, latest = _offsets(src.get("endOffset")), _offsets(src.get("latestOffset"))
        for t, parts in latest.items():
            for part, off in parts.items():
                total += max(0, off - end.get(t, {}).get(part, off))
    return total


def _unreported_drops(progress: Mapping[str, Any], duplicates: int, reported: int) -> int:
    """Rows dropped at the plan's dedup steps that Spark did not report: entered − passed −
    duplicates − reported, from the steps' row counts (observed metrics of
    :func:`radstack.pipeline.dedup.count_rows`); 0 for a plan without them."""
    observed = progress.get("observedMetrics") or {}
    entered = sum(_field(m, "rows") for k, m in observed.items() if k.startswith(ENTERED_METRIC_PREFIX))
    passed = sum(_field(m, "rows") for k, m in observed.items() if k.startswith(PASSED_METRIC_PREFIX))
    return max(0, entered - passed - duplicates - reported)


def _field(metrics: Any, name: str) -> int:
    """One field of an observed-metrics row: a dict from JSON, a pyspark ``Row`` from a live query."""
    if metrics is None:
        return 0
    value = metrics.get(name) if isinstance(metrics, dict) else getattr(metrics, name, None)
    return int(value or 0)


@dataclass
class ProgressTracker:
    """Accumulates progress events by batch id (each counted once) into the state dict."""

    totals: dict[str, int] = field(default_factory=lambda: {"duplicatesDropped": 0, "droppedByWatermark": 0})
    latest: dict[str, Any] = field(default_factory=dict)
    seen: set[tuple[str, int, str]] = field(default_factory=set)

    @classmethod
    def resume(cls, previous: dict[str, Any] | None) -> ProgressTracker:
        t = cls()
        if previous:
            for k in t.totals:
                t.totals[k] = int(previous.get(k, 0))
        return t

    @staticmethod
    def key(p: Mapping[str, Any]) -> tuple[str, int, str]:
        """What identifies a progress event: run id and batch id — and, for an idle trigger, its time:
        it reports the id of the NEXT batch (and no ``addBatch``), and updates the rates and lag, but
        must neither be counted nor hide the real batch of that id."""
        executed = "addBatch" in (p.get("durationMs") or {})
        return str(p.get("runId")), int(p.get("batchId", -1)), "" if executed else str(p.get("timestamp"))

    def update(self, progresses: list[Any]) -> bool:
        """Add the progress events not seen yet (by run id + batch id); True when any was new.

        ``droppedByWatermark`` adds what Spark's state operators report and the rows its dedup steps
        dropped without reporting them — rows behind the dedup watermark, which Spark 4 filters out
        ahead of the state operator — found from the rows counted into and out of each step."""
        changed = False
        for raw in progresses:
            p = _json(raw)
            executed = "addBatch" in (p.get("durationMs") or {})
            key = self.key(p)
            if key in self.seen:
                continue
            self.seen.add(key)
            self.latest = p
            changed = True
            if not executed:
                continue
            dropped = dupes = 0
            for op in p.get("stateOperators") or []:
                dropped += int(op.get("numRowsDroppedByWatermark", 0) or 0)
                cm = op.get("customMetrics") or {}
                dupes += int(cm.get("numDroppedDuplicateRows", 0) or 0)
            dropped += _unreported_drops(p, dupes, dropped)
            self.totals["droppedByWatermark"] += dropped
            self.totals["duplicatesDropped"] += dupes
        if len(self.seen) > 20_000:  # keep the recent keys (recentProgress holds the last 100 events)
            newest = max(k[1] for k in self.seen)
            self.seen = {k for k in self.seen if k[1] >= newest - 1_000}
        return changed

    def state(self) -> dict[str, Any]:
        p = self.latest
        dur = (p.get("durationMs") or {}).get("triggerExecution")
        srcs = p.get("sources") or []
        return {
            **self.totals,
            "batchId": p.get("batchId"),
            "inputRowsPerSecond": p.get("inputRowsPerSecond"),
            "processedRowsPerSecond": p.get("processedRowsPerSecond"),
            "batchDurationMs": dur,
            "numInputRows": p.get("numInputRows"),
            "endOffsets": {k: v for s in srcs for k, v in _offsets(s.get("endOffset")).items()},
            "latestOffsets": {k: v for s in srcs for k, v in _offsets(s.get("latestOffset")).items()},
            "lag": lag_from_progress(p) if p else None,
            "eventTimeWatermark": (p.get("eventTime") or {}).get("watermark"),
            "updated": format_instant(now_millis()),
        }


def committed_offsets(sink: dict[str, dict[str, int]] | None,
                      end: dict[str, dict[str, int]] | None) -> dict[str, dict[str, int]]:
    """Per topic and partition, the next offset the job will read: the end offsets of the last batch
    Spark committed (its progress), or further on the offsets the sink published with its segments.
    The sink's own record lags when a batch's last records were dropped before the sink (late,
    duplicates, filtered), so the larger of the two is the commit."""
    out: dict[str, dict[str, int]] = {}
    for source in (sink or {}, end or {}):
        for topic, parts in source.items():
            for part, off in (parts or {}).items():
                cur = out.setdefault(topic, {})
                cur[str(part)] = max(int(off), cur.get(str(part), -1))
    return out


def status_view(sink_state: dict[str, Any] | None, progress: dict[str, Any] | None) -> dict[str, Any]:
    """The numbers ``radctl status`` prints for one datasource."""
    s, p = sink_state or {}, progress or {}
    c = s.get("counters") or {}
    return {
        "inputRate": p.get("inputRowsPerSecond"),
        "processedRate": p.get("processedRowsPerSecond"),
        "batchDurationMs": p.get("batchDurationMs"),
        "lastBatchId": s.get("lastBatchId"),
        "committedOffsets": committed_offsets(s.get("offsets"), p.get("endOffsets")),
        "lag": p.get("lag"),
        "processed": c.get("processed", 0),
        "unparseable": c.get("unparseable", 0),
        "deadLettered": c.get("deadLettered", 0),
        "thrownAway": int(c.get("thrownAway", 0)) + int(p.get("droppedByWatermark", 0)),
        "duplicatesDropped": p.get("duplicatesDropped", 0),
        "watermark": s.get("watermark"),
    }


def streaming_status(settings: Settings, metadata: MetadataStore = None) -> dict[str, dict[str, Any]]:
    """``status_view`` per datasource that has streaming state in the metadata store."""

    own = metadata is None
    md = metadata or MetadataStore.from_settings(settings, create=False)
    try:

        names = sorted(n for n, s in load_catalog(settings).items() if s.processing.topics)
        out: dict[str, dict[str, Any]] = {}
        for n in names:
            s, p = md.get_state(state_key(n)), md.get_state(progress_key(n))
            if s is not None or p is not None:
                out[n] = status_view(s, p)
            for r in range(1, MAX_REPLICAS):  # real-time replicas, when there are some
                s, p = md.get_state(state_key(n, r)), md.get_state(progress_key(n, r))
                if s is not None or p is not None:
                    out.setdefault(n, {}).setdefault("replicas", {})[str(r)] = status_view(s, p)
        return out
    except Exception:  # no tables yet, unreadable specs: nothing to show
        return {}
    finally:
        if own:
            md.close()


def streaming_health(settings: Settings, max_age_seconds: float = 60.0, replica: int = 0,
                     since_ms: int | None = None) -> bool:
    """True when every streaming datasource (spec files with topics, running supervisors) reported
    progress (of ``replica``) within ``max_age_seconds`` — and, with ``since_ms`` (when the process
    started), since then: a report the previous process left is not this one's health."""

    try:

        names = [n for n, s in load_catalog(settings).items() if s.processing.topics]
        with MetadataStore.from_settings(settings, create=False) as md:
            if replica == 0:  # the supervisors' streams run in the first streaming process
                names += [k for k, r in load_supervisors(md).items() if not r.suspended]
            now = now_millis()
            for n in names:
                p = md.get_state(progress_key(n, replica)) or {}
                if not p.get("updated"):
                    return False
                updated = parse_instant(p["updated"])
                if now - updated > max_age_seconds * 1000 or (since_ms is not None and updated < since_ms):
                    return False
        return bool(names)
    except Exception:
        return False
