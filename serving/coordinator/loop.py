"""The coordinator loop: one pass runs every duty of :data:`serving.coordinator.duties.DUTIES` in order
(Druid's ``DruidCoordinator``); a duty's failure is logged, counted and reported, never raised, so the
loop keeps going."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
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
    """What one pass did, keyed by duty name (Druid's ``CoordinatorRunStats``): ``report["compaction"]`` is
    what that duty returned; a duty that did not run (it needs deep storage and tasks were running) or
    failed (its error is in ``errors``) has no entry — reading it raises ``KeyError``, never a silent
    default."""

    stats: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def __getitem__(self, duty: str) -> Any:
        return self.stats[duty]

    def __contains__(self, duty: str) -> bool:
        return duty in self.stats


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
            report.stats[duty.name] = duty.run(ctx)
            metrics.COORDINATOR_RUNS.labels(duty.name, "success").inc()
        except Exception as e:  # noqa: BLE001 - a duty must not stop the loop
            log.exception("coordinator duty %s failed", duty.name)
            report.errors.append(f"{duty.name}: {e}")
            metrics.COORDINATOR_RUNS.labels(duty.name, "failed").inc()
    return report


class CoordinatorLoop:
    """Runs the coordinator duties every ``coordinator.period_seconds`` in a daemon thread.

    Orphan-file collection (every duty that needs deep storage) is skipped while ``busy()`` — tasks are
    running: their files are written before they are published, and must not look like leftovers of a
    failed publish."""

    def __init__(self, settings: Settings, metadata: MetadataStore, deep_storage: DeepStorage | None, *,
                 busy: Callable[[], bool] = lambda: False, spark_compactor: SparkCompactor | None = None) -> None:
        self.settings, self.metadata, self.deep_storage = settings, metadata, deep_storage
        self.busy, self.spark_compactor = busy, spark_compactor
        self.period = max(0.05, float(settings.coordinator.period_seconds or 10))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.runs = 0
        self.last_report: DutyReport | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="radstack-coordinator", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def run_once(self) -> DutyReport:
        report = run_duties(self.metadata, None if self.busy() else self.deep_storage, self.settings,
                            spark_compactor=self.spark_compactor)
        self.runs += 1
        self.last_report = report
        return report

    def _loop(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self.run_once()
            except Exception:  # noqa: BLE001 - the loop must survive anything
                log.exception("coordinator pass failed")
