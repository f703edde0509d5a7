"""What every request handler of the embedded server reaches through ``request.app.state.ctx``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from radstack.config import Settings
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.metadata import MetadataStore
from radstack.time.clock import now_millis
from serving.jobs import BatchJobs


@dataclass
class ServerContext:
    """The server's long-lived parts, created by the app's lifespan and closed by it.

    ``metadata`` is a :class:`radstack.storage.metadata.MetadataStore`, ``deep_storage`` a
    :class:`radstack.storage.deep_storage.DeepStorage`, ``task_runner`` the Overlord's
    :class:`serving.overlord.tasks.TaskRunner`, ``broker`` the query broker service (None when the
    broker is not part of this build), ``coordinator`` the :class:`serving.coordinator.loop.CoordinatorLoop`."""

    settings: Settings
    metadata: MetadataStore
    deep_storage: DeepStorage
    task_runner: Any
    broker: Any = None
    coordinator: Any = None
    subscriptions: Any = None  # serving.subscriptions.SubscriptionHub
    jobs: BatchJobs = field(default_factory=BatchJobs)
    started_ms: int = field(default_factory=lambda: now_millis())
