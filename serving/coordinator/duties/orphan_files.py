"""Segment folders in deep storage under ``segments/`` that no ``druid_segments`` row (used or not) points
to: files of a publish that never committed. They are deleted once their newest file is older than
``coordinator.orphan_files_min_age_seconds`` (an in-flight task's files are young)."""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any, Protocol

from radstack.storage.deep_storage import DeepStorageError
from radstack.storage.metadata import MetadataStore
from radstack.storage.segments import SEGMENTS_PREFIX, folder_of_key, layout_folder
from radstack.time.clock import now_millis
from serving.coordinator.duties.base import Duty, DutyContext

log = logging.getLogger(__name__)



class _DeepStorage(Protocol):  # the part of radstack.storage.deep_storage.DeepStorage used here
    def list(self, prefix: str) -> list[str]: ...
    def modified_ms(self, key: str) -> int: ...
    def delete_prefix(self, prefix: str) -> int: ...
    def key_for_load_spec(self, load_spec: dict[str, Any]) -> str: ...


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
        folder = folder_of_key(key)
        if folder is not None:
            folders[folder].append(key)
    if not folders:
        return []
    known: set[str] = set()
    for row in metadata.segment_rows(used=None):
        known.add(layout_folder(row.segment.id))
        if row.segment.load_spec:
            try:
                folder = folder_of_key(deep_storage.key_for_load_spec(row.segment.load_spec))
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


def _run(ctx: DutyContext) -> list[str]:
    assert ctx.deep_storage is not None
    min_age = int(float(ctx.settings.coordinator.orphan_files_min_age_seconds or 0) * 1000)
    return collect_orphan_segment_files(ctx.metadata, ctx.deep_storage, older_than_ms=min_age, now_ms=ctx.now_ms)


DUTY = Duty("collect_orphan_segment_files", _run, needs_deep_storage=True)
