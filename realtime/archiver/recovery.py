"""Start-up recovery of a Kafka partition's archive: finish or undo the flush a crash interrupted.

A flush writes its manifest, then its data files, then commits ``last + 1`` to Kafka, then deletes the
manifest. So a manifest found when a partition is assigned is one of:

- ``last < committed``: the commit happened, only the clean-up did not → delete the manifest;
- every listed file exists: the files are complete, only the commit may be missing → commit
  ``last + 1`` and resume there (the files are the truth, as in Kafka Connect's HDFS sink);
- some files are missing: the crash came while moving them → delete the ones that are there, and
  resume at the committed offset, which re-reads and rewrites the whole range.

Either way every offset ends up in exactly one data file.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.raw_archive import manifest_prefix

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecoveryResult:
    resume_offset: int | None  # where to start reading (None: the committed offset)
    commit_offset: int | None  # an offset to commit before resuming (a completed flush)
    completed: int = 0  # manifests whose files were complete
    undone: int = 0  # manifests whose partial files were deleted
    stale: int = 0  # manifests left over after a commit


def recover_partition(deep_storage: DeepStorage, topic: str, partition: int, committed: int | None) -> RecoveryResult:
    """Resolve every manifest of one partition against its committed offset (None: nothing committed)."""
    keys = sorted(k for k in deep_storage.list(manifest_prefix(topic, partition)) if k.endswith(".json"))
    resume: int | None = None
    commit: int | None = None
    completed = undone = stale = 0
    position = committed
    undo_rest = False
    for key in keys:
        manifest = json.loads(deep_storage.get_bytes(key))
        first, last = int(manifest["first"]), int(manifest["last"])
        if position is not None and last < position:
            deep_storage.delete(key)
            stale += 1
            continue
        files: list[str] = list(manifest["files"])
        present = [f for f in files if deep_storage.exists(f)]
        if len(present) == len(files) and not undo_rest:
            commit = resume = position = last + 1
            completed += 1
            log.info("archiver recovery: %s[%d] %d..%d complete, committing %d", topic, partition, first, last, last + 1)
            # the manifest is deleted by the caller after the commit succeeded
        else:
            for f in present:
                deep_storage.delete(f)
            deep_storage.delete(key)
            undone += 1
            log.warning(
                "archiver recovery: %s[%d] %d..%d was partial (%d of %d files); rewriting from %s",
                topic, partition, first, last, len(present), len(files), position,
            )
            undo_rest = True  # nothing after a partial flush can stand: it is all re-read
    return RecoveryResult(resume, commit, completed, undone, stale)


def delete_committed_manifests(deep_storage: DeepStorage, topic: str, partition: int, committed: int) -> int:
    """Delete manifests of flushes whose offsets are all below ``committed``."""
    n = 0
    for key in deep_storage.list(manifest_prefix(topic, partition)):
        if not key.endswith(".json"):
            continue
        last = int(key.rsplit("/", 1)[-1].split("-")[1].split(".")[0])
        if last < committed:
            deep_storage.delete(key)
            n += 1
    return n
