"""Submit ingestion specs to a Druid Overlord and follow them.

Works against any server that speaks Druid's Overlord API — a real Apache Druid cluster (the
Overlord, or a Router proxying to it) or radstack's own server, whose ``/druid/indexer/v1/task``
accepts the same ``index_parallel`` specs:

* ``POST /druid/indexer/v1/task`` → ``{"task": id}``;
* ``GET /druid/indexer/v1/task/{id}/status`` → ``{"status": {"status": RUNNING|SUCCESS|FAILED, …}}``;
* ``POST /druid/indexer/v1/supervisor`` → ``{"id": dataSource}``;
* ``GET /druid/coordinator/v1/loadstatus`` (Coordinator) → ``{ds: percent loaded}``;
* the Coordinator's rules and compaction configuration, its used-segment metadata, and SQL on the Broker
  (``sys.segments``, the answers a re-index is measured by: :mod:`radstack.druid_cluster.reindex`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from radstack.config import DruidSettings

__all__ = ["druid_client", "DruidApiError", "TaskFailedError", "TaskStatus", "OverlordClient", "TERMINAL_STATES"]

TERMINAL_STATES = ("SUCCESS", "FAILED")


class DruidApiError(RuntimeError):
    """The server refused a request or answered something that is not Druid's API."""

    def __init__(self, message: str, status_code: int | None = None, body: Any = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = body


class TaskFailedError(RuntimeError):
    def __init__(self, status: TaskStatus) -> None:
        super().__init__(f"task {status.id} {status.status}: {status.error_msg or 'no error message'}")
        self.status = status


@dataclass(frozen=True)
class TaskStatus:
    id: str
    status: str  # RUNNING | SUCCESS | FAILED (WAITING/PENDING show as RUNNING with a runnerStatusCode)
    runner_status: str | None = None
    error_msg: str | None = None
    duration_ms: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def done(self) -> bool:
        return self.status in TERMINAL_STATES

    @property
    def ok(self) -> bool:
        return self.status == "SUCCESS"

    @classmethod
    def from_json(cls, task_id: str, body: Mapping[str, Any]) -> TaskStatus:
        st = body.get("status")
        if not isinstance(st, Mapping):
            raise DruidApiError(f"task {task_id}: no status object in {dict(body)!r}", body=body)
        status = str(st.get("status") or st.get("statusCode") or "")
        if not status:
            raise DruidApiError(f"task {task_id}: empty status in {dict(st)!r}", body=body)
        duration = st.get("duration")
        return cls(
            id=str(body.get("task") or st.get("id") or task_id),
            status=status,
            runner_status=st.get("runnerStatusCode"),
            error_msg=st.get("errorMsg"),
            duration_ms=None if duration in (None, -1) else int(duration),
            raw=dict(st),
        )


class OverlordClient:
    """A small client for the Overlord (and the Coordinator's load status)."""

    def __init__(
        self,
        url: str,
        *,
        auth: tuple[str, str] | None = None,
        timeout: float = 60.0,
        coordinator_url: str | None = None,
        broker_url: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.coordinator_url = (coordinator_url or url).rstrip("/")
        self.broker_url = (broker_url or url).rstrip("/")
        self._client = httpx.Client(auth=auth, timeout=timeout, transport=transport)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OverlordClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- HTTP -------------------------------------------------------------------------------
    def _request(self, method: str, url: str, body: Any = None) -> Any:
        try:
            resp = self._client.request(method, url, json=body)
        except httpx.HTTPError as e:
            raise DruidApiError(f"{method} {url}: {e}") from e
        try:
            payload: Any = resp.json()
        except ValueError:
            payload = resp.text
        if resp.status_code >= 400:
            detail = payload
            if isinstance(payload, Mapping):
                detail = payload.get("errorMessage") or payload.get("error") or payload
            raise DruidApiError(f"{method} {url} → HTTP {resp.status_code}: {detail}", resp.status_code, payload)
        return payload

    def _found(self, url: str, *, missing: tuple[int, ...] = (404,)) -> Any:
        """``GET url``; None where Druid answers that there is no such thing (``missing`` statuses)."""
        try:
            return self._request("GET", url)
        except DruidApiError as e:
            if e.status_code in missing:
                return None
            raise

    # -- tasks ------------------------------------------------------------------------------
    def submit_task(self, task: Mapping[str, Any]) -> str:
        body = self._request("POST", f"{self.url}/druid/indexer/v1/task", dict(task))
        if not isinstance(body, Mapping) or not body.get("task"):
            raise DruidApiError(f"task submission answered {body!r}, expected {{\"task\": id}}", body=body)
        return str(body["task"])

    def task_status(self, task_id: str) -> TaskStatus:
        body = self._request("GET", f"{self.url}/druid/indexer/v1/task/{quote(task_id, safe='')}/status")
        if not isinstance(body, Mapping):
            raise DruidApiError(f"task {task_id}: status answered {body!r}", body=body)
        return TaskStatus.from_json(task_id, body)

    def task_payload(self, task_id: str) -> dict[str, Any] | None:
        """The task as submitted (``GET …/task/{id}``: ``{"payload": …}``); None when Druid does not know it."""
        body = self._found(f"{self.url}/druid/indexer/v1/task/{quote(task_id, safe='')}")
        return dict(body.get("payload") or {}) if isinstance(body, Mapping) else None

    def task_report(self, task_id: str) -> Any:
        return self._request("GET", f"{self.url}/druid/indexer/v1/task/{quote(task_id, safe='')}/reports")

    def wait_for_task(
        self,
        task_id: str,
        *,
        timeout_s: float = 900.0,
        poll_s: float = 1.0,
        on_status: Callable[[TaskStatus], None] | None = None,
        raise_on_failure: bool = True,
    ) -> TaskStatus:
        """Poll until the task is SUCCESS or FAILED (a 404 right after submission is retried)."""
        deadline = time.monotonic() + timeout_s
        last: TaskStatus | None = None
        while True:
            try:
                st = self.task_status(task_id)
            except DruidApiError as e:
                if e.status_code != 404 or time.monotonic() > deadline:
                    raise
                st = None
            if st is not None:
                if on_status is not None and st != last:
                    on_status(st)
                last = st
                if st.done:
                    if raise_on_failure and not st.ok:
                        raise TaskFailedError(st)
                    return st
            if time.monotonic() > deadline:
                raise TimeoutError(f"task {task_id} still {last.status if last else 'unknown'} after {timeout_s:.0f}s")
            time.sleep(poll_s)

    # -- supervisors ------------------------------------------------------------------------
    def submit_supervisor(self, spec: Mapping[str, Any]) -> str:
        body = self._request("POST", f"{self.url}/druid/indexer/v1/supervisor", dict(spec))
        if not isinstance(body, Mapping) or not body.get("id"):
            raise DruidApiError(f"supervisor submission answered {body!r}, expected {{\"id\": …}}", body=body)
        return str(body["id"])

    def supervisor_status(self, supervisor_id: str) -> Any:
        return self._request("GET", f"{self.url}/druid/indexer/v1/supervisor/{quote(supervisor_id, safe='')}/status")

    def supervisor_spec(self, supervisor_id: str) -> dict[str, Any] | None:
        """The supervisor's current spec; None when there is none (never posted, or terminated)."""
        body = self._found(f"{self.url}/druid/indexer/v1/supervisor/{quote(supervisor_id, safe='')}")
        return dict(body) if isinstance(body, Mapping) else None

    def supervisor_action(self, supervisor_id: str, action: str) -> None:
        """``suspend``, ``resume`` or ``terminate``."""
        self._request("POST", f"{self.url}/druid/indexer/v1/supervisor/{quote(supervisor_id, safe='')}/{action}")

    # -- queries on the Broker --------------------------------------------------------------
    def native(self, query: Mapping[str, Any]) -> Any:
        return self._request("POST", f"{self.broker_url}/druid/v2", dict(query))

    def sql(self, query: str, parameters: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        body: dict[str, Any] = {"query": query, "resultFormat": "object"}
        if parameters:
            body["parameters"] = parameters
        rows = self._request("POST", f"{self.broker_url}/druid/v2/sql", body)
        if not isinstance(rows, list):
            raise DruidApiError(f"SQL answered {rows!r}, expected a list of rows", body=rows)
        return rows

    # -- coordinator ------------------------------------------------------------------------
    def load_status(self) -> dict[str, float]:
        """Percent of each datasource's used segments that historicals serve (Coordinator
        ``/druid/coordinator/v1/loadstatus``)."""
        body = self._request("GET", f"{self.coordinator_url}/druid/coordinator/v1/loadstatus")
        return {str(k): float(v) for k, v in body.items()} if isinstance(body, Mapping) else {}

    def load_percent(self, data_source: str) -> float:
        """:meth:`load_status` of one datasource (0 while the Coordinator has not seen it)."""
        return self.load_status().get(data_source, 0.0)

    def used_segments(self, data_source: str) -> list[dict[str, Any]]:
        """The datasource's used segments in the metadata store (``…/metadata/datasources/{ds}/segments?full``)."""
        body = self._found(f"{self.coordinator_url}/druid/coordinator/v1/metadata/datasources/"
                           f"{quote(data_source, safe='')}/segments?full", missing=(204, 404))
        return [dict(s) for s in body] if isinstance(body, list) else []

    def rules(self, data_source: str) -> list[dict[str, Any]]:
        body = self._request("GET", f"{self.coordinator_url}/druid/coordinator/v1/rules/{quote(data_source, safe='')}")
        return list(body) if isinstance(body, list) else []

    def set_rules(self, data_source: str, rules: list[dict[str, Any]]) -> None:
        self._request("POST", f"{self.coordinator_url}/druid/coordinator/v1/rules/{quote(data_source, safe='')}", rules)

    def compaction_config(self, data_source: str) -> dict[str, Any] | None:
        body = self._found(f"{self.coordinator_url}/druid/coordinator/v1/config/compaction/{quote(data_source, safe='')}")
        return dict(body) if isinstance(body, Mapping) else None

    def set_compaction_config(self, config: Mapping[str, Any]) -> None:
        self._request("POST", f"{self.coordinator_url}/druid/coordinator/v1/config/compaction", dict(config))

    def delete_compaction_config(self, data_source: str) -> None:
        self._request("DELETE", f"{self.coordinator_url}/druid/coordinator/v1/config/compaction/{quote(data_source, safe='')}")

    def wait_for_load(self, data_source: str, *, timeout_s: float = 300.0, poll_s: float = 1.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if self.load_percent(data_source) >= 100.0:
                    return
            except DruidApiError as e:
                if e.status_code not in (204, 404) or time.monotonic() > deadline:
                    raise
            if time.monotonic() > deadline:
                raise TimeoutError(f"{data_source}: segments not all loaded after {timeout_s:.0f}s")
            time.sleep(poll_s)


def druid_client(druid: DruidSettings) -> OverlordClient:
    """A client of the Druid cluster of the ``druid:`` settings."""
    return OverlordClient(druid.overlord_url, auth=druid.auth, timeout=float(druid.timeout_seconds),
                          coordinator_url=druid.coordinator, broker_url=druid.broker)
