"""``radctl backfill --wait`` against the embedded Airflow 3 (``radctl airflow up``'s process: its own venv,
a free loopback port, the generated admin credential), found with nothing exported: one DAG run per
chunk through the REST API, waited for, summarised from the metadata store; ``radctl airflow status``
shows the DAG's last run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from operations import airflow_local, stack
from operations.processes import free_port
from radstack.config import load_settings
from radstack.time.intervals import format_instant, parse_instant
from tests.fixtures.batch import set_watermark, write_archive
from tests.fixtures.sockets import listening
from tests.integration.test_airflow_dags import SPEC

pytestmark = pytest.mark.slow

T0 = parse_instant("2026-11-20T00:00:00Z")
HOUR = 3_600_000



@pytest.fixture
def airflow_embedded(radstack_home: Path) -> Iterator[str]:
    """The embedded Airflow of this home on a free port, started as a user does: ``radctl up --airflow``
    (here with ``--only airflow``: no Kafka or streaming needed)."""
    (radstack_home / "radstack.yaml").write_text(
        f"airflow: {{port: {free_port()}}}\nspark: {{shuffle_partitions: 2}}\n")
    settings = load_settings(env={"RADSTACK_HOME": str(radstack_home)})
    env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
    env["RADSTACK_HOME"] = str(radstack_home)
    up = subprocess.run([sys.executable, "-m", "operations", "up", "--airflow", "--only", "airflow"], env=env,
                        capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert up.returncode == 0, up.stdout + up.stderr
    assert "Airflow UI: " + airflow_local.url(settings) in up.stdout
    pid = int(orjson.loads((settings.run_dir / "airflow.pid").read_text())["pid"])
    # its only open port is the API server's, on loopback (no log servers on every interface)
    assert listening(pid) == {("127.0.0.1", int(settings.airflow.port))}
    try:
        yield airflow_local.url(settings)
    finally:
        stack.down(settings, only=["airflow"])


def test_backfill_via_airflow_rest(radstack_home: Path, airflow_embedded: str) -> None:
    from radstack.storage.deep_storage import open_deep_storage
    from radstack.storage.metadata import MetadataStore

    settings = load_settings(env={"RADSTACK_HOME": str(radstack_home)})
    (radstack_home / "datasources").mkdir(exist_ok=True)
    (radstack_home / "datasources" / "web.yaml").write_text(SPEC.format(name="web", gran="hour"))
    storage = open_deep_storage(settings)
    events = [{"timestamp": format_instant(T0 + i * 5_000), "id": f"e{i}", "page": f"/p{i % 3}"} for i in range(300)]
    write_archive(storage, "web", [orjson.dumps(e) for e in events + events[:20]])
    with MetadataStore.from_settings(settings) as md:
        set_watermark(md, "web", T0 + 5 * HOUR)
    # nothing to export: `--via auto` finds the embedded Airflow and its generated credential
    env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
    env.update({"RADSTACK_HOME": str(radstack_home)})
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

    assert "via airflow" in proc.stdout + proc.stderr

    # `radctl status` shows the DAG's last run
    st = subprocess.run([sys.executable, "-m", "operations", "airflow", "status", "--json"], env=env,
                        capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert st.returncode == 0, st.stdout + st.stderr
    [dag] = orjson.loads(st.stdout)["dags"]
    assert dag["dag_id"] == "radstack_rebuild_web" and not dag["paused"] and dag["next"]
    # the backfill's runs are done; only the schedule's own latest interval may still wait for its data
    assert all(r["run_id"].startswith("scheduled__") and r["tasks"] == 4 for r in dag["running"]), dag["running"]

    shown = subprocess.run([sys.executable, "-m", "operations", "airflow", "status", "--show-password"], env=env,
                           capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert f"password {airflow_local.admin_password(settings)}" in " ".join(shown.stdout.split())

    # a wrong password for a configured Airflow is a clear error, exit 3
    bad = dict(env, RADSTACK_AIRFLOW__URL=airflow_embedded, RADSTACK_AIRFLOW__USERNAME="admin",
               RADSTACK_AIRFLOW__PASSWORD="wrong")
    proc = subprocess.run([sys.executable, "-m", "operations", "backfill", "--interval", "2026-11-20T00/PT1H",
                           "--datasource", "web"], env=bad, capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 3 and "refused the credentials" in " ".join(proc.stderr.split())
