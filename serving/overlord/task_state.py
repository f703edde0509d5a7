"""An active task as the runner holds it (:class:`TaskState`), and what a task's own code needs of the
runner that runs it (:class:`TaskHost`): the kill, compact and Spark tasks take both."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from radstack.config import Settings
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.ingest_stats import IngestStats
from radstack.storage.metadata import MetadataStore
from serving.jobs import BatchJobs
from serving.overlord.reports import ingestion_report
from serving.overlord.task_spec import IndexTaskSpec


@dataclass
class TaskState:
    """What the runner knows about an active task (the metadata store has the rest)."""

    spec: IndexTaskSpec
    stats: IngestStats
    created_ms: int
    cancel: threading.Event = field(default_factory=threading.Event)
    runner_status: str = "WAITING"  # WAITING | RUNNING
    ingestion_state: str = "NOT_STARTED"  # NOT_STARTED | BUILD_SEGMENTS | COMPLETED
    started_ms: int | None = None

    def live_report(self) -> dict[str, Any]:
        return ingestion_report(self.spec.id, self.stats, state=self.ingestion_state, error_msg=None)


class TaskHost(Protocol):
    """The runner as a task sees it: the settings, the stores and the batch layer's entry points."""

    settings: Settings
    metadata: MetadataStore
    deep_storage: DeepStorage
    jobs: BatchJobs
