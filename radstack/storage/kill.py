"""Kill: delete UNUSED segments from the metadata store and deep storage, for good.

Two ways in, both off unless asked for:

- the ``kill`` task (Druid's ``{"type": "kill", "dataSource", "interval", "versions"?, "limit"?,
  "maxUsedStatusLastUpdatedTime"?}``, plus radstack's ``"dryRun": true``) through the Overlord API
  (``serving/overlord/kill_task.py``), the coordinator API (``serving/coordinator/api.py``) or
  :func:`kill_unused_segments`;
- the automatic duty (``serving/coordinator/duties/kill.py`` runs :func:`kill_duty`; Druid's
  ``KillUnusedSegments``), enabled with
  ``coordinator.kill.on``: every ``coordinator.kill.period_seconds`` it kills, per datasource, unused
  segments whose interval ended at least ``duration_to_retain`` ago and that have been unused for at
  least ``buffer_period``, at most ``max_segments`` per datasource and pass.

Nothing used is ever deleted:

1. candidates are read with ``used = false`` and must lie inside the kill interval;
2. the rows are deleted by ``DELETE … WHERE id IN (…) AND used = false RETURNING id`` — a segment
   marked used in the meantime is not deleted, and its files are not touched;
3. files are deleted only for rows that step 2 deleted, only under ``segments/…/{partition}/``
   folders, and never a folder that a used segment's ``loadSpec`` points into (checked after step 2).

Rows go first, files second (as Druid's kill task): a crash in between leaves files no row refers to,
which the coordinator's orphan-file collection deletes later.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from radstack import metrics
from radstack.config import Settings
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.metadata import MetadataStore, SegmentRow
from radstack.storage.segments import DataSegment, folder_of_key, layout_folder
from radstack.storage.task_records import TaskRecord
from radstack.time.clock import now_millis
from radstack.time.intervals import (
    Interval,
    Period,
    TimeParseError,
    datetime_to_ms,
    ms_to_datetime,
)

log = logging.getLogger(__name__)

__all__ = [
    "KillError",
    "KillReport",
    "segment_folder",
    "find_kill_candidates",
    "kill_unused_segments",
    "kill_duty",
    "KILL_STATE_KEY",
]

KILL_STATE_KEY = "coordinator.kill.last_run_ms"


class KillError(ValueError):
    """A kill request that cannot be run (bad interval, datasource, …)."""


@dataclass
class KillReport:
    data_source: str
    interval: Interval
    dry_run: bool
    segments: list[str] = field(default_factory=list)  # killed (or, dry run, would be)
    folders: list[str] = field(default_factory=list)  # deep-storage folders deleted (or would be)
    bytes: int = 0
    kept_files: list[str] = field(default_factory=list)  # killed rows whose files a used segment still needs
    skipped: list[str] = field(default_factory=list)  # candidates that were used again when deleted
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "dataSource": self.data_source,
            "interval": self.interval.iso(),
            "dryRun": self.dry_run,
            "killedSegments": list(self.segments),
            "numKilledSegments": len(self.segments),
            "deletedFolders": list(self.folders),
            "deletedBytes": self.bytes,
            "keptFiles": list(self.kept_files),
            "skipped": list(self.skipped),
            "errors": list(self.errors),
        }



def segment_folder(deep_storage: DeepStorage, segment: DataSegment) -> str | None:
    """The deep-storage folder holding ``segment``'s files (``segments/ds/iv/version/partition/``):
    where its ``loadSpec`` points (when this deep storage can map it back), else the layout default.
    None for tombstones and load specs of another storage."""
    if segment.is_tombstone or segment.load_spec.get("type") == "tombstone":
        return None
    if segment.load_spec:
        try:
            key = str(deep_storage.key_for_load_spec(segment.load_spec))
        except Exception:  # noqa: BLE001 - another deep storage's loadSpec: not ours to delete
            return None
        return folder_of_key(key)
    return folder_of_key(layout_folder(segment.id))


def _used_folders(metadata: MetadataStore, deep_storage: DeepStorage) -> set[str]:
    out: set[str] = set()
    for seg in metadata.segments(None, used=True):
        folder = segment_folder(deep_storage, seg)
        if folder:
            out.add(folder)
        # the layout default too, in case a loadSpec and the id disagree
        out.add(layout_folder(seg.id))
    return out


def find_kill_candidates(
    metadata: MetadataStore,
    data_source: str,
    interval: Interval,
    *,
    versions: Sequence[str] | None = None,
    max_used_status_last_updated_ms: int | None = None,
    limit: int | None = None,
) -> list[SegmentRow]:
    """Unused segments of ``data_source`` whose interval lies inside ``interval`` (Druid's kill
    task contract), optionally only of ``versions`` and unused since at most the given instant."""
    rows = [
        r for r in metadata.segment_rows(data_source, used=False, interval=interval)
        if not r.used and interval.contains(r.segment.interval)
    ]
    if versions:
        wanted = set(versions)
        rows = [r for r in rows if r.segment.version in wanted]
    if max_used_status_last_updated_ms is not None:
        rows = [r for r in rows if (r.used_status_last_updated or r.created_date) <= max_used_status_last_updated_ms]
    if limit is not None:
        rows = rows[: max(0, int(limit))]
    return rows


def kill_unused_segments(
    metadata: MetadataStore,
    deep_storage: DeepStorage,
    data_source: str,
    interval: Interval,
    *,
    dry_run: bool = False,
    versions: Sequence[str] | None = None,
    max_used_status_last_updated_ms: int | None = None,
    limit: int | None = None,
) -> KillReport:
    """Delete the unused segments of ``data_source`` inside ``interval`` (rows, then files). With
    ``dry_run`` nothing changes and the report says what would go."""
    if not data_source:
        raise KillError("dataSource: required")
    report = KillReport(data_source, interval, dry_run)
    candidates = find_kill_candidates(
        metadata, data_source, interval, versions=versions,
        max_used_status_last_updated_ms=max_used_status_last_updated_ms, limit=limit,
    )
    if not candidates:
        return report
    by_id = {r.id: r.segment for r in candidates}
    if dry_run:
        protected = _used_folders(metadata, deep_storage)
        report.segments = list(by_id)
        for sid, seg in by_id.items():
            folder = segment_folder(deep_storage, seg)
            if folder is None:
                continue
            if folder in protected:
                report.kept_files.append(sid)
            else:
                report.folders.append(folder)
                report.bytes += int(seg.size or 0)
        return report

    deleted = metadata.delete_unused_segments(list(by_id))
    deleted_set = set(deleted)
    report.skipped = [sid for sid in by_id if sid not in deleted_set]
    report.segments = [sid for sid in by_id if sid in deleted_set]
    # Read the used set AFTER the rows are gone: a segment published or re-used meanwhile that
    # shares a folder protects it.
    protected = _used_folders(metadata, deep_storage)
    for sid in report.segments:
        seg = by_id[sid]
        folder = segment_folder(deep_storage, seg)
        if folder is None:
            continue
        if folder in protected:
            report.kept_files.append(sid)
            continue
        try:
            deep_storage.delete_prefix(folder)
        except Exception as e:  # noqa: BLE001 - the orphan-file collection retries later
            report.errors.append(f"{folder}: {e}")
            log.warning("kill: could not delete %s: %s", folder, e)
            continue
        report.folders.append(folder)
        report.bytes += int(seg.size or 0)
    if report.segments:
        metrics.KILL_SEGMENTS.labels(data_source).inc(len(report.segments))
        metrics.KILL_BYTES.labels(data_source).inc(report.bytes)
        log.info("kill %s %s: deleted %d segment(s), %d folder(s)", data_source, interval.iso(),
                 len(report.segments), len(report.folders))
    return report


# ---- the automatic duty ---------------------------------------------------------------------


def _period_ms_before(now_ms: int, text: str, key: str) -> int:
    try:
        return datetime_to_ms(Period.parse(text).add_to(ms_to_datetime(now_ms), -1))
    except (TimeParseError, ValueError) as e:
        raise KillError(f"{key}: {e}") from e


def _as_list(value: Any) -> list[str]:
    if not value:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


def kill_duty(
    metadata: MetadataStore,
    deep_storage: DeepStorage,
    settings: Settings,
    *,
    now_ms: int | None = None,
    force: bool = False,
) -> list[KillReport]:
    """One pass of the automatic kill (no-op unless ``coordinator.kill.on``; at most once per
    ``coordinator.kill.period_seconds`` unless ``force``)."""
    if not bool(settings.coordinator.kill.on):
        return []
    now = now_millis() if now_ms is None else now_ms
    period_ms = int(float(settings.coordinator.kill.period_seconds or 0) * 1000)
    last = metadata.get_state(KILL_STATE_KEY)
    if not force and last is not None and now - int(last) < period_ms:
        return []
    retain_end = _period_ms_before(now, str(settings.coordinator.kill.duration_to_retain),
                                   "coordinator.kill.duration_to_retain")
    buffer_end = _period_ms_before(now, str(settings.coordinator.kill.buffer_period),
                                   "coordinator.kill.buffer_period")
    max_segments = int(settings.coordinator.kill.max_segments or 100)
    dry_run = bool(settings.coordinator.kill.dry_run)
    only = set(_as_list(settings.coordinator.kill.datasources))
    reports: list[KillReport] = []
    unused = metadata.segment_rows(None, used=False)
    by_ds: dict[str, list[SegmentRow]] = {}
    for r in unused:
        by_ds.setdefault(r.segment.data_source, []).append(r)
    for ds, rows in sorted(by_ds.items()):
        if only and ds not in only:
            continue
        eligible = [
            r for r in rows
            if r.segment.interval.end <= retain_end and (r.used_status_last_updated or r.created_date) <= buffer_end
        ]
        metrics.KILL_PENDING.labels(ds).set(len(eligible))
        if not eligible:
            continue
        start = min(r.segment.interval.start for r in eligible)
        window = Interval(start, retain_end)
        # the pass over this datasource is a task, as Druid's coordinator issues kill tasks (#51)
        task = TaskRecord(settings, metadata, task_type="kill", datasource=ds, started_by="coordinator",
                          payload={"interval": window.iso(), "dryRun": dry_run, "limit": max_segments})
        task.line(f"kill of {ds} {window.iso()}: {len(eligible):,} unused segment(s) eligible"
                  + (" (dry run)" if dry_run else ""))
        try:
            report = kill_unused_segments(
                metadata, deep_storage, ds, window, dry_run=dry_run,
                max_used_status_last_updated_ms=buffer_end, limit=max_segments,
            )
        except Exception as e:
            task.failure(e)
            task.finish(False, f"{type(e).__name__}: {e}", {})
            raise
        task.line(f"{'would kill' if dry_run else 'killed'} {len(report.segments):,} segment(s), "
                  f"{report.bytes:,} bytes" + (f"; errors: {report.errors}" if report.errors else ""))
        task.finish(not report.errors, "; ".join(report.errors) or None, report.to_json())
        reports.append(report)
    if not dry_run:
        metadata.put_state(KILL_STATE_KEY, now)
    return reports
