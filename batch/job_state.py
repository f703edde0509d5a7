"""In-flight rebuilds, recorded in the metadata store, so a failed or killed run's files get cleaned up.

A rebuild writes its segment files under ``segments/{ds}/{interval}/{version}/…`` *before* it publishes
(publish is the last step, so nothing is visible until then). Before writing anything it records
``{version, intervals, pid, host, started}`` under the state key ``batch.inflight.{datasource}``;
after publishing (or after cleaning up its own failure) it removes the record. A record left behind
is a run that died: the next run of the same datasource deletes that version's folders — unless the
version was published after all, or the run may still be alive (same host and its pid is running,
and it is younger than ``batch.stale_job_seconds``).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

from radstack.process_state import pid_alive
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.metadata import MetadataStore
from radstack.storage.segments import SegmentId, segment_path
from radstack.time.clock import now_millis
from radstack.time.intervals import Interval, format_instant

__all__ = ["InflightJob", "inflight_key", "register", "unregister", "clean_dead_jobs", "version_prefixes"]


def inflight_key(data_source: str) -> str:
    return f"batch.inflight.{data_source}"


@dataclass(frozen=True)
class InflightJob:
    version: str
    intervals: tuple[str, ...]
    pid: int
    host: str
    started: int

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "intervals": list(self.intervals),
            "pid": self.pid,
            "host": self.host,
            "started": self.started,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> InflightJob:
        return cls(str(d["version"]), tuple(d.get("intervals") or ()), int(d.get("pid", 0)),
                   str(d.get("host", "")), int(d.get("started", 0)))  # fmt: skip


def version_prefixes(data_source: str, intervals: list[Interval], version: str) -> list[str]:
    """The deep-storage folders a rebuild of ``intervals`` at ``version`` writes under."""

    out = []
    for iv in intervals:
        path = segment_path(SegmentId(data_source, iv, version, 0))
        out.append("segments/" + path.rsplit("/", 1)[0] + "/")
    return out


def _jobs(metadata: MetadataStore, data_source: str) -> list[InflightJob]:
    raw = metadata.get_state(inflight_key(data_source)) or {}
    return [InflightJob.from_json(v) for v in (raw.get("jobs") or [])]


def _save(metadata: MetadataStore, data_source: str, jobs: list[InflightJob]) -> None:
    metadata.put_state(inflight_key(data_source), {"jobs": [j.to_json() for j in jobs]})


def register(metadata: MetadataStore, data_source: str, version: str, intervals: list[Interval]) -> InflightJob:
    job = InflightJob(version, tuple(iv.iso() for iv in intervals), os.getpid(), socket.gethostname(),
                      now_millis())  # fmt: skip
    _save(metadata, data_source, [*(j for j in _jobs(metadata, data_source) if j.version != version), job])
    return job


def unregister(metadata: MetadataStore, data_source: str, version: str) -> None:
    _save(metadata, data_source, [j for j in _jobs(metadata, data_source) if j.version != version])


def _alive(job: InflightJob, stale_ms: int, now_ms: int) -> bool:
    if now_ms - job.started >= stale_ms:
        return False
    if job.host != socket.gethostname():
        return True  # cannot tell: leave it until it is stale
    if job.pid == os.getpid():
        return False  # a record of this very process is from an earlier, failed call
    return pid_alive(job.pid)


def clean_dead_jobs(
    metadata: MetadataStore,
    deep_storage: DeepStorage,
    data_source: str,
    *,
    stale_seconds: float = 21600,
    now_ms: int | None = None,
) -> list[str]:
    """Delete the unpublished files of dead runs of ``data_source``; returns the folders deleted."""
    now = now_millis() if now_ms is None else now_ms
    keep: list[InflightJob] = []
    deleted: list[str] = []
    for job in _jobs(metadata, data_source):
        if _alive(job, int(stale_seconds * 1000), now):
            keep.append(job)
            continue
        intervals = [Interval.parse(i) for i in job.intervals]
        published = {
            s.interval
            for iv in intervals
            for s in metadata.segments(data_source, used=None, interval=iv)
            if s.version == job.version
        }
        for iv, prefix in zip(intervals, version_prefixes(data_source, intervals, job.version), strict=True):
            if iv in published:
                continue
            if deep_storage.delete_prefix(prefix):
                deleted.append(prefix)
    _save(metadata, data_source, keep)
    return deleted


def describe(job: InflightJob) -> str:
    return f"version {job.version} (pid {job.pid} on {job.host}, started {format_instant(job.started)})"
