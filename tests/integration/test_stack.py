"""`radctl up && radctl generate ads --events 10000 && radctl status && radctl down` in a temp home:
real processes (Kafka broker, receiver, serving), pid files, idempotent `up`, consumer lag in
`status`, a crashed child reported, a port in use reported, a clean `down`."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson
import pytest

from operations.processes import free_port, port_in_use
from radstack.process_state import pid_alive
from tests.fixtures.kafka import consume

pytestmark = pytest.mark.slow


def _free_ports(n: int) -> list[int]:
    ports: set[int] = set()
    while len(ports) < n:
        ports.add(free_port())
    return sorted(ports)


def _serving_runs(home: Path) -> bool:
    """Whether the serving app (another part of radstack) starts at all in this checkout; `up` then
    includes it, else the test runs the stack without it."""
    try:
        from fastapi.testclient import TestClient

        from operations.server import create_server_app as create_app
        from radstack.config import load_settings

        with TestClient(create_app(load_settings(env={"RADSTACK_HOME": str(home),
                                                            "RADSTACK_SERVER__ALLOWED_HOSTS": '["testserver"]'}))) as c:
            return c.get("/status/health").status_code == 200
    except Exception:
        return False


def _radctl(env: dict[str, str], *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from operations.cli import app; app()", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def stack_env(tmp_path: Path):  # type: ignore[no-untyped-def]
    kafka, controller, receiver, server, connect = _free_ports(5)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
    env.update(
        RADSTACK_HOME=str(tmp_path / "home"),
        RADSTACK_KAFKA__PORT=str(kafka),
        RADSTACK_KAFKA__CONTROLLER_PORT=str(controller),
        RADSTACK_KAFKA__HEAP="384m",
        RADSTACK_RECEIVER__PORT=str(receiver),
        RADSTACK_SERVER__PORT=str(server),
        RADSTACK_SPARK__CONNECT_PORT=str(connect),
        COLUMNS="200",
    )
    yield env
    _radctl(env, "down", timeout=120)  # whatever the test did, leave nothing running


def test_up_generate_status_down(stack_env: dict[str, str]):
    env = stack_env
    home = Path(env["RADSTACK_HOME"])
    skip = [] if _serving_runs(home.parent / "probe") else ["--skip", "serve"]
    r = _radctl(env, "up", *skip)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "kafka: started" in r.stdout and "receiver: started" in r.stdout
    assert "spark-connect: started" in r.stdout  # the batch jobs' warm Spark
    names = ["kafka", "receiver", "spark-connect"] + ([] if skip else ["serve"])
    pids = {n: orjson.loads((home / "run" / f"{n}.pid").read_bytes())["pid"] for n in names}
    assert all(pid_alive(p) for p in pids.values())
    assert (home / "kafka" / "data" / "meta.properties").exists()
    assert (home / "logs" / "kafka.log").exists()

    again = _radctl(env, "up", *skip)  # idempotent
    assert again.returncode == 0, again.stdout + again.stderr
    assert "kafka: already running" in again.stdout and "receiver: already running" in again.stdout
    assert {n: orjson.loads((home / "run" / f"{n}.pid").read_bytes())["pid"] for n in names} == pids

    g = _radctl(env, "generate", "ads", "--events", "10000", "--seed", "11", "-q")
    assert g.returncode == 0, g.stdout + g.stderr
    summary = orjson.loads((home / "generated" / "ads" / "summary.json").read_bytes())
    assert summary["streams"]["impressions"]["unique"] == 10_000
    sent_imps = summary["streams"]["impressions"]["unique"] + summary["streams"]["impressions"]["duplicates"]

    # the receiver started by `up` delivers to the same broker
    port = env["RADSTACK_RECEIVER__PORT"]
    rr = httpx.post(f"http://127.0.0.1:{port}/v1/events/events", content=b'{"timestamp": 1}', timeout=30)
    assert (rr.status_code, rr.json()) == (200, {"accepted": 1})

    bootstrap = f"127.0.0.1:{env['RADSTACK_KAFKA__PORT']}"
    got = consume(bootstrap, "impressions", "stack-test", 4000, timeout=30)
    assert len(got) == 4000

    s = _radctl(env, "status", "--json")
    assert s.returncode == 0, s.stdout + s.stderr
    st = orjson.loads(s.stdout)
    procs = {p["name"]: p for p in st["processes"]}
    assert all(procs[n]["state"] == "running" and procs[n]["healthy"] for n in names)
    assert procs["kafka"]["port"] == int(env["RADSTACK_KAFKA__PORT"])
    assert st["kafka"]["topics"]["impressions"] == 2
    group = {grp["group"]: grp for grp in st["kafka"]["groups"]}["stack-test"]
    assert group["lag"] == sent_imps - 4000
    table = _radctl(env, "status")
    assert "stack-test" in table.stdout and "running" in table.stdout

    d = _radctl(env, "down")
    assert d.returncode == 0, d.stdout + d.stderr
    assert all(f"{n}: stopped" in d.stdout for n in names)
    time.sleep(0.5)
    assert not any(pid_alive(p) for p in pids.values())
    assert not list((home / "run").glob("*.pid"))
    assert not port_in_use("127.0.0.1", int(env["RADSTACK_KAFKA__PORT"]))
    assert not port_in_use("127.0.0.1", int(env["RADSTACK_SPARK__CONNECT_PORT"]))
    assert "nothing is running" in _radctl(env, "down").stdout


def test_crashed_child_and_port_in_use(stack_env: dict[str, str]):
    env = stack_env
    home = Path(env["RADSTACK_HOME"])
    # a port in use: clear message, nothing left running
    with socket.socket() as s:
        s.bind(("127.0.0.1", int(env["RADSTACK_KAFKA__PORT"])))
        s.listen()
        r = _radctl(env, "up", "--only", "kafka")
        assert r.returncode == 1
        assert f"port 127.0.0.1:{env['RADSTACK_KAFKA__PORT']} is already in use" in r.stdout
    assert not list((home / "run").glob("*.pid")) if (home / "run").exists() else True

    r = _radctl(env, "up", "--only", "kafka,receiver")
    assert r.returncode == 0, r.stdout + r.stderr
    pid = orjson.loads((home / "run" / "receiver.pid").read_bytes())["pid"]
    os.killpg(pid, signal.SIGKILL)
    time.sleep(0.5)
    s = _radctl(env, "status", "--json")
    assert s.returncode == 3  # something that was started is not running
    procs = {p["name"]: p for p in orjson.loads(s.stdout)["processes"]}
    assert procs["receiver"]["state"] == "crashed" and procs["kafka"]["state"] == "running"
    r = _radctl(env, "up", "--only", "kafka,receiver")  # restarts the crashed one only
    assert r.returncode == 0, r.stdout + r.stderr
    assert "receiver: was not running any more" in r.stdout and "receiver: started" in r.stdout
    assert "kafka: already running" in r.stdout
