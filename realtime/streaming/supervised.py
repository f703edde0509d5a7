"""Streaming queries for the Kafka supervisors posted to the supervisor API
(:mod:`radstack.storage.supervisors`): ``radctl stream`` reconciles every few seconds — a query for each
running supervisor, none for a suspended or terminated one, a restart when a supervisor was updated or
reset. All queries share the process's one Spark session.

A reset forgets the offsets: the query's checkpoint and its committed sink state go, so the next query
starts at the earliest offsets (``useEarliestOffset``) or the latest (Druid's default). Segments already
published stay. The reset generation applied is kept in the metadata store, so a restarted process does
not reset again.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from radstack.config import Settings
from radstack.storage.metadata import MetadataStore
from radstack.storage.replicas import progress_key, state_key
from radstack.storage.supervisors import SupervisorRecord, load_supervisors
from realtime.streaming.job import StreamingJob, StreamOptions, delete_checkpoint

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

__all__ = ["SupervisedStreams", "reset_key"]


def reset_key(supervisor_id: str) -> str:
    """The metadata-store key holding the reset generation last applied to a supervisor's query."""
    return f"supervisor.{supervisor_id}.reset"


class SupervisedStreams:
    """The streaming queries of the supervisors, kept in line with their records by :meth:`reconcile`."""

    def __init__(self, settings: Settings, metadata: MetadataStore, options: StreamOptions,
                 spark: SparkSession | None = None) -> None:
        self.settings = settings
        self.metadata = metadata
        self.options = options
        self._spark = spark
        self.jobs: dict[str, tuple[tuple[int, int], StreamingJob]] = {}

    def reconcile(self) -> None:
        """Start, stop and restart queries so that exactly the running supervisors have one."""
        records = load_supervisors(self.metadata)
        wanted = {k: r for k, r in records.items() if not r.suspended}
        for sid, (version, job) in list(self.jobs.items()):
            rec = wanted.get(sid)
            if rec is None or (rec.generation, rec.reset_generation) != version or not self._alive(job):
                log.info("supervisor %s: stopping its query", sid)
                job.stop()
                del self.jobs[sid]
        for sid, rec in wanted.items():
            if sid not in self.jobs:
                self._start(rec)
        for _, job in self.jobs.values():
            job.poll_progress()

    def stop(self) -> None:
        for _, job in self.jobs.values():
            job.stop()
        self.jobs.clear()

    @staticmethod
    def _alive(job: StreamingJob) -> bool:
        q = job.query
        if q is None or q.isActive:
            return True
        log.warning("supervisor %s: its query ended (%s); restarting it", job.spec.name, q.exception())
        return False

    def _start(self, rec: SupervisorRecord) -> None:
        options = replace(self.options, starting_offsets="earliest" if rec.use_earliest_offset else "latest")
        job = StreamingJob(self.settings, rec.datasource_spec(), options, spark=self._spark, metadata=self.metadata)
        if int(self.metadata.get_state(reset_key(rec.id), 0) or 0) < rec.reset_generation:
            self._forget_offsets(rec, job)
        job.start()
        self._spark = job.spark
        self.jobs[rec.id] = ((rec.generation, rec.reset_generation), job)
        log.info("supervisor %s: streaming %s (generation %d, checkpoint %s)", rec.id, rec.topic, rec.generation,
                 job.checkpoint)

    def _forget_offsets(self, rec: SupervisorRecord, job: StreamingJob) -> None:
        log.info("supervisor %s: reset, forgetting its offsets", rec.id)
        delete_checkpoint(job.spark, job.checkpoint)
        for key in (state_key(rec.id), progress_key(rec.id)):
            self.metadata.put_state(key, {})
        self.metadata.put_state(reset_key(rec.id), rec.reset_generation)
