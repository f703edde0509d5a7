"""Coordinator duties, as plain functions the serving process runs in a loop (Druid's
``DruidCoordinator`` duties, the parts radstack needs):

- :func:`mark_overshadowed_unused` — segments whose whole interval is covered by complete sets of
  higher versions are marked ``used = false`` (Druid's ``MarkOvershadowedSegmentsAsUnused``). It only
  looks at *published, used* segments, so unpublished or incomplete data never hides anything; with
  ``delay_ms`` the overshadowing segments must have been used for that long first, giving brokers
  time to switch over before the old version disappears.
- :func:`collect_orphan_segment_files` — segment folders in deep storage under ``segments/`` that no
  ``druid_segments`` row (used or not) points to: files of a publish that never committed. They are
  deleted once their newest file is older than ``older_than_ms`` (an in-flight task's files are young).
- :func:`run_duties` — one pass of both with the delays from the settings.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from radstack import metrics
from radstack.config import Settings
from radstack.storage.compaction import SparkCompactor, compaction_duty
from radstack.storage.deep_storage import DeepStorageError
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.metadata import MetadataStore, SegmentRow
from radstack.storage.segments import segment_path
from radstack.storage.timeline import TimelineConflictError, VersionedIntervalTimeline
from radstack.time.clock import now_millis
from serving.kill import kill_duty
from serving.retention import apply_retention
from serving.self_metrics import self_metrics_duty

log = logging.getLogger(__name__)

SEGMENTS_PREFIX = "segments/"


class _DeepStorage(Protocol):  # the part of radstack.storage.deep_storage.DeepStorage used here
    def list(self, prefix: str) -> list[str]: ...
    def modified_ms(self, key: str) -> int: ...
    def delete_prefix(self, prefix: str) -> int: ...
    def key_for_load_spec(self, load_spec: dict[str, Any]) -> str: ...



def _changed_ms(row: SegmentRow) -> int:
    """When the row last became used (publish or mark_used)."""
    return max(row.created_date, row.used_status_last_updated or row.created_date)


def find_overshadowed(rows: Iterable[SegmentRow], *, now_ms: int, delay_ms: int = 0) -> list[str]:
    """Ids among ``rows`` (used segments) that are fully overshadowed, and whose overshadowing
    segments have all been used for at least ``delay_ms``."""
    by_ds: dict[str, list[SegmentRow]] = defaultdict(list)
    for r in rows:
        by_ds[r.segment.data_source].append(r)
    out: list[str] = []
    for ds, ds_rows in sorted(by_ds.items()):
        try:
            tl = VersionedIntervalTimeline.from_segments((r.segment for r in ds_rows), ds)
        except TimelineConflictError as e:
            log.error("datasource %s: timeline conflict, not marking anything unused: %s", ds, e)
            continue
        changed = {r.id: _changed_ms(r) for r in ds_rows}
        for r in ds_rows:
            if not tl.is_overshadowed(r.segment):
                continue
            if delay_ms > 0:
                newest = max((changed[s.identifier] for s in tl.overshadowing(r.segment)), default=now_ms)
                if now_ms - newest < delay_ms:
                    continue
            out.append(r.id)
    return out


def mark_overshadowed_unused(
    metadata: MetadataStore, *, now_ms: int | None = None, delay_ms: int = 0
) -> list[str]:
    """Mark fully overshadowed used segments unused; returns their ids (in Druid's segment order)."""
    now = now_millis() if now_ms is None else now_ms
    ids = find_overshadowed(metadata.segment_rows(used=True), now_ms=now, delay_ms=delay_ms)
    if ids:
        n = metadata.mark_unused(ids)
        log.info("marked %d overshadowed segment(s) unused", n)
    return ids


def _segment_folder(key: str) -> str | None:
    """``segments/{ds}/{start}_{end}/{version}/{partition}/file`` → the folder, with a trailing ``/``."""
    if not key.startswith(SEGMENTS_PREFIX):
        return None
    parts = key.split("/")
    if len(parts) < 6 or not all(parts[:5]):
        return None
    return "/".join(parts[:5]) + "/"


def collect_orphan_segment_files(
    metadata: MetadataStore,
    deep_storage: _DeepStorage,
    *,
    older_than_ms: int,
    now_ms: int | None = None,
    dry_run: bool = False,
) -> list[str]:
    """Delete segment folders (``segments/…/{partition}/``) that no ``druid_segments`` row refers to
    and whose newest file is at least ``older_than_ms`` old. Returns the folders (deleted, or that
    would be with ``dry_run``)."""
    now = now_millis() if now_ms is None else now_ms
    # List the files first, then read the metadata: a publish that commits in between is then seen.
    folders: dict[str, list[str]] = defaultdict(list)
    for key in deep_storage.list(SEGMENTS_PREFIX):
        folder = _segment_folder(key)
        if folder is not None:
            folders[folder].append(key)
    if not folders:
        return []
    known: set[str] = set()
    for row in metadata.segment_rows(used=None):
        known.add(SEGMENTS_PREFIX + segment_path(row.segment.id) + "/")
        if row.segment.load_spec:
            try:
                folder = _segment_folder(deep_storage.key_for_load_spec(row.segment.load_spec))
            except (DeepStorageError, ValueError, KeyError):
                folder = None  # a load spec of another deep storage: nothing of ours
            if folder:
                known.add(folder)
    deleted: list[str] = []
    for folder in sorted(folders):
        if folder in known:
            continue
        try:
            newest = max(deep_storage.modified_ms(k) for k in folders[folder])
        except FileNotFoundError:
            continue  # being changed right now; look again next time
        if now - newest < older_than_ms:
            continue
        if not dry_run:
            deep_storage.delete_prefix(folder)
            log.info("deleted orphan segment files %s", folder)
        deleted.append(folder)
    return deleted


@dataclass
class DutyReport:
    overshadowed_unused: list[str] = field(default_factory=list)
    orphan_folders_deleted: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # retention, compaction, kill and self-metrics duties (serving/retention.py, compaction.py, kill.py)
    retention_dropped: list[str] = field(default_factory=list)
    compacted: list[Any] = field(default_factory=list)
    killed: list[Any] = field(default_factory=list)
    self_metrics_rows: int = 0


def run_duties(
    metadata: MetadataStore,
    deep_storage: _DeepStorage | None,
    settings: Settings,
    *,
    now_ms: int | None = None,
    spark_compactor: SparkCompactor | None = None,
) -> DutyReport:
    """One coordinator pass. Each duty's failure is logged and reported, never raised (the loop
    keeps going). Settings: ``coordinator.overshadowed_unused_delay_seconds`` and
    ``coordinator.orphan_files_min_age_seconds`` (default 1 hour)."""
    report = DutyReport()
    now = now_millis() if now_ms is None else now_ms
    delay_ms = int(float(settings.coordinator.overshadowed_unused_delay_seconds or 0) * 1000)
    try:
        report.overshadowed_unused = mark_overshadowed_unused(metadata, now_ms=now, delay_ms=delay_ms)
    except Exception as e:  # noqa: BLE001 - a duty must not stop the loop
        log.exception("coordinator duty mark_overshadowed_unused failed")
        report.errors.append(f"mark_overshadowed_unused: {e}")
    if deep_storage is not None:
        min_age = int(float(settings.coordinator.orphan_files_min_age_seconds or 0) * 1000)
        try:
            report.orphan_folders_deleted = collect_orphan_segment_files(
                metadata, deep_storage, older_than_ms=min_age, now_ms=now
            )
        except Exception as e:  # noqa: BLE001 - a duty must not stop the loop
            log.exception("coordinator duty collect_orphan_segment_files failed")
            report.errors.append(f"collect_orphan_segment_files: {e}")
    _run_lifecycle_duties(metadata, deep_storage, settings, now, report, spark_compactor)
    return report


def _run_lifecycle_duties(
    metadata: MetadataStore, deep_storage: DeepStorage, settings: Settings, now: int, report: DutyReport,
    spark_compactor: SparkCompactor | None,
) -> None:
    """Retention rules, then (with a deep storage) compaction, kill and self-metrics ingestion."""

    duties: list[tuple[str, Any]] = []
    if bool(settings.coordinator.retention.on):
        duties.append(("retention", lambda: setattr(
            report, "retention_dropped", apply_retention(metadata, now_ms=now).dropped_ids)))
    if deep_storage is not None:
        duties.append(("compaction", lambda: setattr(
            report, "compacted", compaction_duty(metadata, deep_storage, settings, now_ms=now,
                                                   spark_compactor=spark_compactor))))
        duties.append(("kill", lambda: setattr(
            report, "killed", kill_duty(metadata, deep_storage, settings, now_ms=now))))
        duties.append(("self_metrics", lambda: setattr(
            report, "self_metrics_rows", self_metrics_duty(metadata, deep_storage, settings, now_ms=now))))
    for name, run in duties:
        try:
            run()
            metrics.COORDINATOR_RUNS.labels(name, "success").inc()
        except Exception as e:  # noqa: BLE001 - a duty must not stop the loop
            log.exception("coordinator duty %s failed", name)
            report.errors.append(f"{name}: {e}")
            metrics.COORDINATOR_RUNS.labels(name, "failed").inc()
