"""The parts of Airflow 3's REST API (``/api/v2``) radstack uses: triggering and watching the rebuild
DAGs (:mod:`batch.backfill`) and the per-DAG overview ``radctl status`` shows. Small on purpose: the
CLI's status imports it without the batch jobs."""

from __future__ import annotations

from typing import Any

import httpx

from radstack.config import Settings


class AirflowError(RuntimeError):
    """Airflow refused or could not be reached (something the user must fix)."""


class AirflowClient:
    """The parts of Airflow 3's REST API (``/api/v2``) a backfill uses, with JWT auth when configured."""

    def __init__(self, url: str, username: str = "", password: str = "", *, timeout: float = 30.0) -> None:

        self.url = url.rstrip("/")
        self.username = username
        self.password = password
        self._http = httpx.Client(base_url=self.url, timeout=timeout)
        self._token: str | None = None

    def close(self) -> None:
        self._http.close()

    def _headers(self) -> dict[str, str]:
        if self._token is None and self.username:
            r = self._request_raw("POST", "/auth/token", json={"username": self.username, "password": self.password})
            if r.status_code >= 400:
                raise AirflowError(f"Airflow at {self.url} refused the credentials: HTTP {r.status_code} {r.text[:200]}")
            self._token = r.json()["access_token"]
        return {"Authorization": f"Bearer {self._token}"} if self._token else {}

    def _request_raw(self, method: str, path: str, **kw: Any) -> Any:

        try:
            return self._http.request(method, path, **kw)
        except httpx.HTTPError as e:
            raise AirflowError(f"Airflow is unreachable at {self.url}: {type(e).__name__}: {e}") from e

    def request(self, method: str, path: str, **kw: Any) -> Any:
        r = self._request_raw(method, path, headers=self._headers(), **kw)
        if r.status_code >= 400:
            raise AirflowError(f"Airflow {method} {path}: HTTP {r.status_code}: {r.text[:300]}")
        return r.json() if r.content else None

    def health(self) -> dict[str, Any]:
        return self.request("GET", "/api/v2/monitor/health")

    def unpause(self, dag_id: str) -> None:
        self.request("PATCH", f"/api/v2/dags/{dag_id}", json={"is_paused": False})

    def trigger(self, dag_id: str, conf: dict[str, Any], run_id: str) -> dict[str, Any]:
        body = {"dag_run_id": run_id, "logical_date": None, "conf": conf}
        return self.request("POST", f"/api/v2/dags/{dag_id}/dagRuns", json=body)

    def run_state(self, dag_id: str, run_id: str) -> str:
        return str(self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")["state"])

    def dag(self, dag_id: str) -> dict[str, Any]:
        return dict(self.request("GET", f"/api/v2/dags/{dag_id}"))

    def dag_runs(self, dag_id: str, *, limit: int = 1, states: tuple[str, ...] = ()) -> list[dict[str, Any]]:
        """The newest runs first (``states``: only those)."""
        params: list[tuple[str, Any]] = [("limit", limit), ("order_by", "-run_after")]
        params += [("state", st) for st in states]
        return list(self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns", params=params)["dag_runs"])

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        tis = self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
        return {str(t["task_id"]): t.get("state") for t in tis}


def dag_overview(settings: Settings, client: AirflowClient, datasources: list[str]) -> list[dict[str, Any]]:
    """Per datasource's DAG: paused or not, the last run (state, interval), the next scheduled interval and
    the runs in flight with their progress (tasks finished of all) — what ``radctl status`` shows."""
    out = []
    for ds in datasources:
        dag = dag_id(settings, ds)
        row: dict[str, Any] = {"datasource": ds, "dag_id": dag}
        try:
            info = client.dag(dag)
        except AirflowError as e:
            row["error"] = "not parsed yet" if "404" in str(e) else str(e)
            out.append(row)
            continue
        row["paused"] = bool(info.get("is_paused"))
        if info.get("next_dagrun_data_interval_start"):
            row["next"] = f"{info['next_dagrun_data_interval_start']}/{info.get('next_dagrun_data_interval_end')}"
        last = client.dag_runs(dag, limit=1)
        if last:
            r = last[0]
            row["last"] = {"run_id": r["dag_run_id"], "state": r["state"], "conf": r.get("conf") or {},
                           "interval": (r.get("conf") or {}).get("interval")
                           or f"{r.get('data_interval_start')}/{r.get('data_interval_end')}",
                           "end_date": r.get("end_date")}  # fmt: skip
        running = []
        for r in client.dag_runs(dag, limit=50, states=("queued", "running")):
            tasks = client.task_states(dag, r["dag_run_id"])
            done = sum(1 for st in tasks.values() if st in ("success", "skipped", "failed", "upstream_failed"))
            running.append({"run_id": r["dag_run_id"], "state": r["state"], "interval": (r.get("conf") or {}).get("interval"),
                            "tasks_done": done, "tasks": len(tasks)})  # fmt: skip
        row["running"] = running
        out.append(row)
    return out


def dag_id(settings: Settings, datasource: str) -> str:
    return f"{settings.airflow.dag_prefix or 'radstack_rebuild_'}{datasource}"
