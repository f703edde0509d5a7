"""The coordinator loop: one pass runs every duty of :data:`serving.coordinator.duties.DUTIES` in order
(Druid's ``DruidCoordinator``); a duty's failure is logged, counted and reported, never raised, so the
loop keeps going."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from radstack import metrics
from radstack.config import Settings
from radstack.storage.compaction import SparkCompactor
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.metadata import MetadataStore
from radstack.time.clock import now_millis
from serving.coordinator.duties import DUTIES
from serving.coordinator.duties.base import DutyContext

log = logging.getLogger(__name__)


@dataclass
class DutyReport:
    overshadowed_unused: list[str] = field(default_factory=list)
    orphan_folders_deleted: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    retention_dropped: list[str] = field(default_factory=list)
    compacted: list[Any] = field(default_factory=list)
    killed: list[Any] = field(default_factory=list)
    self_metrics_rows: int = 0


def run_duties(
    metadata: MetadataStore,
    deep_storage: DeepStorage | None,
    settings: Settings,
    *,
    now_ms: int | None = None,
    spark_compactor: SparkCompactor | None = None,
) -> DutyReport:
    """One coordinator pass over every duty (those that need deep storage only with one)."""
    report = DutyReport()
    ctx = DutyContext(metadata, deep_storage, settings, now_millis() if now_ms is None else now_ms, spark_compactor)
    for duty in DUTIES:
        if duty.needs_deep_storage and deep_storage is None:
            continue
        try:
            setattr(report, duty.report_field, duty.run(ctx))
            metrics.COORDINATOR_RUNS.labels(duty.name, "success").inc()
        except Exception as e:  # noqa: BLE001 - a duty must not stop the loop
            log.exception("coordinator duty %s failed", duty.name)
            report.errors.append(f"{duty.name}: {e}")
            metrics.COORDINATOR_RUNS.labels(duty.name, "failed").inc()
    return report
