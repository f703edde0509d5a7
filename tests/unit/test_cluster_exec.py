"""``radctl cluster exec --host N -- CMD`` refuses clearly where it cannot run: no cluster, a cluster
not on hosts, a host number out of range, no command. (Running on a host: tests/cluster/test_hosts.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from operations.cli import app
from operations.host_cluster import host_environment
from operations.hosts import SimulatedHosts


def _invoke(home: Path, *args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, ["cluster", "exec", *args], env={"RADSTACK_HOME": str(home), "RADSTACK_CONFIG": ""})
    return r.exit_code, r.output


def _state(home: Path, hosts: dict | None) -> None:  # type: ignore[type-arg]
    (home / "cluster").mkdir(parents=True)
    state = {"home": str(home), "processes": {}, "launch": {}}
    if hosts is not None:
        state["hosts"] = hosts
    (home / "cluster" / "state.json").write_text(json.dumps(state))


def test_no_cluster(tmp_path: Path) -> None:
    code, out = _invoke(tmp_path, "--host", "1", "--", "true")
    assert code == 1 and "no cluster" in out


def test_a_cluster_not_on_hosts(tmp_path: Path) -> None:
    _state(tmp_path, None)
    code, out = _invoke(tmp_path, "--host", "1", "--", "true")
    assert code == 2 and "not started with `up --hosts N`" in out


@pytest.mark.parametrize("args", [["--host", "4", "--", "true"], ["--host", "1"]])
def test_a_host_out_of_range_or_no_command(tmp_path: Path, args: list[str]) -> None:
    _state(tmp_path, SimulatedHosts(3, tmp_path / "cluster" / "hosts", tag="abc123").to_state())
    code, out = _invoke(tmp_path, *args)
    assert code == 2 and ("no such host" in out or "give the command after --" in out), out


def test_a_dead_host(tmp_path: Path) -> None:
    hosts = SimulatedHosts(2, tmp_path / "cluster" / "hosts", tag="abc123")
    _state(tmp_path, {**hosts.to_state(), "holders": {"1": 2**22 + 12345}})  # no such process
    code, out = _invoke(tmp_path, "--host", "1", "--", "true")
    assert code == 1 and "host 1 is not running" in out


def test_the_environment_of_a_host(tmp_path: Path) -> None:
    hosts = SimulatedHosts(3, tmp_path / "hosts", tag="abc123")
    env = host_environment(hosts, 3)
    assert env == {"RADSTACK_HOME": str(tmp_path / "hosts" / "h3" / "radstack"),
                   "RADSTACK_CONFIG": str(tmp_path / "hosts" / "h3" / "radstack" / "radstack.yaml"),
                   "SPARK_LOCAL_IP": "198.18.0.13"}  # fmt: skip
