"""The embedded Airflow 3: the batch layer's scheduler and UI, one command away.

``radctl up --airflow`` (or ``airflow.embedded: true``) and ``radctl airflow up`` run Airflow's API
server, scheduler, DAG processor and triggerer (:func:`command`) from its own virtualenv (``make airflow`` → ``.venv-airflow``; installed on first use) as one process of
the stack (:data:`operations.stack.PROCESSES`): API server and UI on ``127.0.0.1:{airflow.port}``, the
only port it opens, with radstack's ``dags/``, settings and home wired in through
the environment, its SQLite database, logs and ``airflow.cfg`` in ``{home}/airflow`` (0700), and one user
``admin`` whose password is generated once and kept in ``{home}/airflow/passwords.json`` (0600; the
format of Airflow's simple auth manager, which reads it). :func:`connected` hands the running instance's
URL and credential to ``radctl backfill`` and ``radctl status`` when ``airflow.url`` names no other Airflow.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from batch.airflow_api import AirflowClient, AirflowError, dag_overview
from radstack.config import REPO_ROOT, Settings
from radstack.private_files import private_dir, write_private
from radstack.storage.supervisors import datasource_catalog

__all__ = ["USER", "with_embedded", "airflow_home", "venv_dir", "url", "admin_password", "environment", "prepare", "command",
           "healthy", "connected", "overview"]

USER = "admin"
_HEALTHY = ("metadatabase", "scheduler", "dag_processor", "triggerer")


class AirflowSetupError(RuntimeError):
    """The embedded Airflow cannot be prepared (no virtualenv and no way to make one)."""


def with_embedded(settings: Settings) -> Settings:
    """``settings`` with ``airflow.embedded`` on (``--airflow``, ``radctl airflow up``)."""
    if settings.airflow.embedded:
        return settings
    return settings.model_copy(update={"airflow": settings.airflow.model_copy(update={"embedded": True})})


def airflow_home(settings: Settings) -> Path:
    return settings.home / "airflow"


def venv_dir(settings: Settings) -> Path:
    return Path(str(settings.airflow.venv)).expanduser() if settings.airflow.venv else REPO_ROOT / ".venv-airflow"


def url(settings: Settings) -> str:
    return f"http://127.0.0.1:{int(settings.airflow.port)}"


def _passwords_file(settings: Settings) -> Path:
    return airflow_home(settings) / "passwords.json"


def admin_password(settings: Settings, *, create: bool = False) -> str | None:
    """The embedded Airflow's admin password (generated and stored 0600 the first time, with ``create``)."""
    f = _passwords_file(settings)
    try:
        return str(json.loads(f.read_text())[USER])
    except (OSError, ValueError, KeyError, TypeError):
        if not create:
            return None
    private_dir(airflow_home(settings))
    password = secrets.token_urlsafe(18)
    write_private(f, json.dumps({USER: password}))
    return password


def environment(settings: Settings) -> dict[str, str]:
    """What the Airflow process needs on top of the stack's environment (``RADSTACK_HOME``/``RADSTACK_CONFIG``
    come from there): its home and database under ``{home}/airflow``, loopback binds, radstack's DAGs and
    this interpreter for the work they run, the admin user, no example DAGs."""
    home = airflow_home(settings)
    port = int(settings.airflow.port)
    return {
        "AF": str(venv_dir(settings) / "bin" / "airflow"),
        "PORT": str(port),
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO_ROOT / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": url(settings),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{url(settings)}/execution/",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(_passwords_file(settings)),
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "10",
        "RADSTACK_PYTHON": sys.executable,
        "PATH": f"{venv_dir(settings) / 'bin'}:{os.environ.get('PATH', '')}",
    }


def prepare(settings: Settings, say: Any = print) -> None:
    """The virtualenv (``make airflow`` in the checkout when it is missing: a few minutes, once), the
    private home and the admin password."""
    if not (venv_dir(settings) / "bin" / "airflow").exists():
        if settings.airflow.venv:
            raise AirflowSetupError(f"no Airflow in airflow.venv = {settings.airflow.venv} (bin/airflow is missing)")
        say("installing Airflow 3 into .venv-airflow (`make airflow`, a few minutes, once) …")
        proc = subprocess.run(["make", "-C", str(REPO_ROOT), "airflow"], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise AirflowSetupError(f"`make airflow` failed: {(proc.stdout + proc.stderr)[-1500:]}")
    private_dir(airflow_home(settings))
    admin_password(settings, create=True)


def command(settings: Settings) -> list[str]:
    """``airflow db migrate``, then the four components in one process group (what ``airflow standalone``
    runs, minus its log servers: those bind every interface on ports 8793/8794, and the API server reads
    the task logs from ``{home}/airflow/logs`` itself); when one of them ends, the group ends, so
    ``radctl status`` sees it."""
    script = (
        'set -e; "$AF" db migrate; set +e; '
        '"$AF" scheduler --skip-serve-logs & "$AF" dag-processor & "$AF" triggerer --skip-serve-logs & '
        '"$AF" api-server --host 127.0.0.1 --port "$PORT" & '
        'wait -n; echo "an Airflow component exited ($?): stopping the others"; kill 0'
    )
    return ["/bin/bash", "-c", script, "radstack-airflow"]


def healthy(settings: Settings, timeout: float = 2.0) -> bool:
    """The API answers and the database, scheduler and DAG processor report healthy."""
    try:
        h = httpx.get(f"{url(settings)}/api/v2/monitor/health", timeout=timeout).json()
    except (httpx.HTTPError, ValueError):
        return False
    return all((h.get(k) or {}).get("status") == "healthy" for k in _HEALTHY)


def connected(settings: Settings) -> Settings:
    """``settings`` pointing ``airflow.url`` (user, password) at the embedded Airflow when no other is
    configured and the embedded one has a credential; unchanged otherwise."""
    if settings.airflow.url:
        return settings
    password = admin_password(settings)
    if password is None or not healthy(settings, timeout=1.0):
        return settings
    af = settings.airflow.model_copy(update={"url": url(settings), "username": USER, "password": password})
    return settings.model_copy(update={"airflow": af})


def overview(settings: Settings) -> dict[str, Any]:
    """The Airflow ``radctl status`` shows: where it is, who signs in (the embedded one: the password
    file), whether it answers, and per datasource with topics its DAG's last and next run and the runs in
    flight (:func:`batch.airflow_api.dag_overview`)."""
    s = connected(settings)
    embedded = not settings.airflow.url
    out: dict[str, Any] = {"url": s.airflow.url or url(settings), "embedded": embedded,
                           "user": s.airflow.username or (USER if embedded else ""),
                           "password_file": str(_passwords_file(settings)) if embedded else None}  # fmt: skip
    if not s.airflow.url:
        out["error"] = "not running"
        return out
    try:
        datasources = sorted(n for n, spec in datasource_catalog(settings).items() if spec.processing.topics)
    except Exception as e:  # noqa: BLE001 - a broken spec is reported, not fatal to a status
        out["error"] = f"the datasource catalog: {e}"
        return out
    client = AirflowClient(str(s.airflow.url), str(s.airflow.username), str(s.airflow.password), timeout=5)
    try:
        out["dags"] = dag_overview(settings, client, datasources)
    except AirflowError as e:
        out["error"] = str(e)
    finally:
        client.close()
    return out
