"""Row stats, parse exceptions and Druid's ``ingestionStatsAndErrors`` task report.

Druid's report (``GET /druid/indexer/v1/task/{id}/reports``)::

    {"ingestionStatsAndErrors": {"type": "ingestionStatsAndErrors", "taskId": …,
      "payload": {"ingestionState": "COMPLETED", "unparseableEvents": {"buildSegments": [...]},
                  "rowStats": {"determinePartitions": {…zeros…}, "buildSegments": {"processed", …}},
                  "errorMsg": null, "segmentAvailabilityConfirmed": false,
                  "segmentAvailabilityWaitTimeMs": 0}}}

Each kept parse exception has Druid's ``ParseExceptionReport`` shape: ``input``, ``errorType``
(``unparseable`` | ``processedWithError``), ``details`` and ``timeOfExceptionMillis``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import orjson

from radstack.time.clock import now_millis

ROW_STAT_KEYS = ("processed", "processedBytes", "processedWithError", "thrownAway", "unparseable")

INT_MAX = 2**31 - 1  # Druid's "unlimited" for maxParseExceptions


class MaxParseExceptionsExceeded(RuntimeError):
    """More unparseable rows than ``tuningConfig.maxParseExceptions`` allows."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"Max parse exceptions[{limit}] exceeded")
        self.limit = limit


@dataclass
class RowStats:
    """Counters for one task, shared between the reader thread and the API (a lock guards them)."""

    max_parse_exceptions: int = INT_MAX
    max_saved_parse_exceptions: int = 100
    processed: int = 0
    processed_bytes: int = 0
    processed_with_error: int = 0
    thrown_away: int = 0
    unparseable: int = 0
    samples: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add_bytes(self, n: int) -> None:
        with self._lock:
            self.processed_bytes += n

    def add_unparseable(self, raw: Any, detail: str, *, check: bool = True) -> None:
        """Count one row that could not be parsed; raise once past ``maxParseExceptions``."""
        with self._lock:
            self.unparseable += 1
            self._keep(raw, "unparseable", detail)
        if check:
            self.check()

    def add_unparseable_samples(self, count: int, samples: list[dict[str, Any]]) -> None:
        """Merge the indexer's own unparseable rows (e.g. bad timestamps) into the stats."""
        with self._lock:
            self.unparseable += count
            for s in samples:
                raw = s.get("row", s.get("input", s))
                reason = s.get("reason") or s.get("error") or s.get("details") or "Unparseable row"
                self._keep(raw, "unparseable", reason if isinstance(reason, str) else str(reason))

    def check(self) -> None:
        if self.unparseable > self.max_parse_exceptions:
            raise MaxParseExceptionsExceeded(self.max_parse_exceptions)

    def _keep(self, raw: Any, error_type: str, detail: str) -> None:
        if len(self.samples) >= self.max_saved_parse_exceptions:
            return
        text = raw if isinstance(raw, str) else _to_text(raw)
        self.samples.append({
            "input": text[:4096],
            "errorType": error_type,
            "details": [detail],
            "timeOfExceptionMillis": now_millis(),
        })

    def row_stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "processed": self.processed,
                "processedBytes": self.processed_bytes,
                "processedWithError": self.processed_with_error,
                "thrownAway": self.thrown_away,
                "unparseable": self.unparseable,
            }


def _to_text(raw: Any) -> str:

    try:
        return orjson.dumps(raw, default=str).decode()
    except TypeError:
        return str(raw)


def ingestion_report(
    task_id: str,
    stats: RowStats,
    *,
    state: str,
    error_msg: str | None,
    segments_published: int | None = None,
) -> dict[str, Any]:
    """Druid's ``ingestionStatsAndErrors`` report for a task (live or complete)."""
    zero = dict.fromkeys(ROW_STAT_KEYS, 0)
    with stats._lock:
        samples = list(stats.samples)
    payload: dict[str, Any] = {
        "ingestionState": state,
        "unparseableEvents": {"buildSegments": samples} if samples else {},
        "rowStats": {"determinePartitions": zero, "buildSegments": stats.row_stats()},
        "errorMsg": error_msg,
        "segmentAvailabilityConfirmed": False,
        "segmentAvailabilityWaitTimeMs": 0,
    }
    if segments_published is not None:
        payload["segmentsPublished"] = segments_published
    return {
        "ingestionStatsAndErrors": {
            "type": "ingestionStatsAndErrors",
            "taskId": task_id,
            "payload": payload,
        }
    }
