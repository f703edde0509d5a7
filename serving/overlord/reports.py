"""Druid's ``ingestionStatsAndErrors`` task report, rendered from a task's
:class:`radstack.storage.ingest_stats.IngestStats` (its row stats and parse exceptions).

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

from typing import Any

from radstack.storage.ingest_stats import IngestStats

ROW_STAT_KEYS = ("processed", "processedBytes", "processedWithError", "thrownAway", "unparseable")

def ingestion_report(
    task_id: str,
    stats: IngestStats,
    *,
    state: str,
    error_msg: str | None,
    segments_published: int | None = None,
) -> dict[str, Any]:
    """Druid's ``ingestionStatsAndErrors`` report for a task (live or complete)."""
    zero = dict.fromkeys(ROW_STAT_KEYS, 0)
    samples = stats.kept_samples()
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
