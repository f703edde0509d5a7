"""What every request handler of the embedded server reaches through ``request.app.state.ctx``.

The services are typed by what the handlers and the app's lifespan use of them (protocols), so this
module stays below the services it holds: :class:`serving.overlord.tasks.TaskRunner`,
:class:`serving.broker.service.BrokerService`, :class:`serving.coordinator.loop.CoordinatorLoop` and
:class:`serving.subscriptions.SubscriptionHub` each satisfy theirs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from radstack.config import Settings
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.metadata import MetadataStore
from radstack.time.clock import now_millis
from serving.jobs import BatchJobs


class Service(Protocol):
    """A part started and stopped with the server."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


class TaskSpecLike(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def data_source(self) -> str: ...


class LiveTask(Protocol):
    """An active task as the runner holds it (:class:`serving.overlord.task_state.TaskState`)."""

    @property
    def spec(self) -> TaskSpecLike: ...

    @property
    def runner_status(self) -> str: ...

    def live_report(self) -> dict[str, Any]: ...


class TaskRunnerHandle(Service, Protocol):
    """The Overlord's task runner."""

    def submit(self, spec: Any) -> str: ...

    def get(self, task_id: str) -> LiveTask | None: ...

    def shutdown(self, task_id: str) -> bool: ...

    def active_ids(self) -> list[str]: ...

    def is_busy(self) -> bool: ...


class RunningQueries(Protocol):
    def cancel_all(self) -> None: ...


class BrokerHandle(Service, Protocol):
    """The query broker: the lifespan cancels its queries first, health waits until it is loaded."""

    @property
    def queries(self) -> RunningQueries: ...

    @property
    def loaded(self) -> bool: ...


@dataclass
class ServerContext:
    """The server's long-lived parts, created by the app's lifespan and closed by it. ``broker`` is None
    when the broker is not part of this build; ``coordinator`` and ``subscriptions`` are set when the
    lifespan starts them."""

    settings: Settings
    metadata: MetadataStore
    deep_storage: DeepStorage
    task_runner: TaskRunnerHandle
    broker: BrokerHandle | None = None
    coordinator: Service | None = None
    subscriptions: Service | None = None
    jobs: BatchJobs = field(default_factory=BatchJobs)
    started_ms: int = field(default_factory=lambda: now_millis())
