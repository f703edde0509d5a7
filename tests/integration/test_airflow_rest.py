"""``radctl backfill --via airflow --wait`` against a real ``airflow standalone`` (its own venv, free port,
simple auth manager with a user and password, logs to a file, stopped by process group): one DAG run
per chunk through the REST API, waited for, summarised from the metadata store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from operations.processes import free_port
from radstack.time.intervals import format_instant, parse_instant
from tests.fixtures.airflow import AIRFLOW_PY, REPO, ensure_airflow
from tests.fixtures.batch import set_watermark, write_archive
from tests.integration.test_airflow_dags import SPEC

pytestmark = pytest.mark.slow

T0 = parse_instant("2026-11-20T00:00:00Z")
HOUR = 3_600_000



@pytest.fixture
def airflow_standalone(radstack_home: Path, tmp_path: Path) -> Iterator[str]:
    ensure_airflow()
    port = free_port()
    af = tmp_path / "airflow"
    af.mkdir()
    (af / "passwords.json").write_text(json.dumps({"radstack": "secret"}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "RADSTACK_"))}
    env.update({
        "RADSTACK_HOME": str(radstack_home), "RADSTACK_PYTHON": sys.executable,
        "RADSTACK_SPARK__SHUFFLE_PARTITIONS": "2",
        "AIRFLOW_HOME": str(af), "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__API__HOST": "127.0.0.1", "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "radstack:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(af / "passwords.json"),
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "PATH": f"{AIRFLOW_PY.parent}:{os.environ.get('PATH', '')}",
    })  # fmt: skip
    with (af / "standalone.log").open("wb") as log:
        proc = subprocess.Popen([str(AIRFLOW_PY.parent / "airflow"), "standalone"], env=env, cwd=af, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, (af / "standalone.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "airflow standalone did not become healthy"
            try:
                h = httpx.get(f"{url}/api/v2/monitor/health", timeout=5).json()
                if all(h.get(k, {}).get("status") == "healthy" for k in ("metadatabase", "scheduler", "dag_processor")):
                    break
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(1)
        yield url
    finally:
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            if proc.poll() is not None:
                break
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=wait)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass


def test_backfill_via_airflow_rest(settings, radstack_home: Path, airflow_standalone: str) -> None:  # type: ignore[no-untyped-def]
    from radstack.storage.deep_storage import open_deep_storage
    from radstack.storage.metadata import MetadataStore

    (radstack_home / "datasources").mkdir(exist_ok=True)
    (radstack_home / "datasources" / "web.yaml").write_text(SPEC.format(name="web", gran="hour"))
    storage = open_deep_storage(settings)
    events = [{"timestamp": format_instant(T0 + i * 5_000), "id": f"e{i}", "page": f"/p{i % 3}"} for i in range(300)]
    write_archive(storage, "web", [orjson.dumps(e) for e in events + events[:20]])
    with MetadataStore.from_settings(settings) as md:
        set_watermark(md, "web", T0 + 5 * HOUR)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
    env.update({"RADSTACK_HOME": str(radstack_home), "RADSTACK_AIRFLOW__URL": airflow_standalone,
                "RADSTACK_AIRFLOW__USERNAME": "radstack", "RADSTACK_AIRFLOW__PASSWORD": "secret"})  # fmt: skip
    # the DAG processor needs a moment to parse the new datasource's DAG
    deadline = time.monotonic() + 90
    while True:
        proc = subprocess.run([sys.executable, "-m", "operations", "backfill", "--interval", "2026-11-20T00/PT2H",
                               "--datasource", "web", "--wait", "--json"],
                              env=env, capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
        if proc.returncode != 3 or "404" not in proc.stderr or time.monotonic() > deadline:
            break
        time.sleep(3)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [orjson.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert [r["status"] for r in rows] == ["success", "success"]
    assert all(r["run_id"].startswith("radctl__") for r in rows)
    assert rows[0]["batch_events"] == 300 and rows[1]["batch_events"] == 0
    assert rows[0]["version"] > "2026-11-21" and rows[1]["version"] > "2026-11-21"

    # a wrong password is a clear error, exit 3
    bad = dict(env, RADSTACK_AIRFLOW__PASSWORD="wrong")
    proc = subprocess.run([sys.executable, "-m", "operations", "backfill", "--interval", "2026-11-20T00/PT1H",
                           "--datasource", "web"], env=bad, capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 3 and "refused the credentials" in " ".join(proc.stderr.split())
