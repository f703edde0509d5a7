"""Stopping a process group (``radctl down``): the leader first when it stops its own children
(``radctl stream`` and its Spark JVM), and log files written once (operations/processes.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from operations.processes import stop_process_group, writes_to
from operations.stack import ProcessSpec, start_one
from radstack.process_state import kill_group, pid_alive

# a leader that, told TERM, writes "stopping child" and stops its child itself; the child (like a JVM
# whose driver goes away) writes "child got TERM" when it is signalled directly
CHILD = (
    "import signal, sys, time\n"
    "def term(*_):\n"
    "    print('child got TERM', flush=True); sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, term)\n"
    "print('child ready', flush=True)\n"
    "while True: time.sleep(0.05)\n"
)
LEADER = (
    "import signal, subprocess, sys, time\n"
    f"child = subprocess.Popen([sys.executable, '-c', {CHILD!r}])\n"
    "def term(*_):\n"
    "    print('stopping child', flush=True); time.sleep(0.5); child.kill(); child.wait(); sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, term)\n"
    "print('ready', flush=True)\n"
    "while True: time.sleep(0.05)\n"
)


def _start(log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        p = subprocess.Popen([sys.executable, "-c", LEADER], stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 20
    while "child ready" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    return p


def test_leader_first_lets_the_leader_stop_its_children(tmp_path: Path) -> None:
    p = _start(tmp_path / "a.log")
    assert stop_process_group(p.pid, timeout=20, leader_first=10) is True
    text = (tmp_path / "a.log").read_text()
    assert "stopping child" in text and "child got TERM" not in text  # the child was never signalled by us


def test_without_leader_first_the_whole_group_is_signalled(tmp_path: Path) -> None:
    p = _start(tmp_path / "b.log")
    assert stop_process_group(p.pid, timeout=20) is True
    p.wait(5)
    assert "child got TERM" in (tmp_path / "b.log").read_text()


def test_a_log_handler_is_not_added_for_the_file_stderr_already_writes(tmp_path: Path) -> None:
    log = tmp_path / "stream.log"
    with log.open("ab") as f:
        assert writes_to(f, log) is True
        assert writes_to(f, tmp_path / "other.log") is False
    assert writes_to(sys.stderr, log) is False


def test_a_slow_preparation_does_not_eat_the_health_timeout(settings: Any) -> None:
    """``radctl up --airflow`` the first time installs Airflow (minutes) in ``prepare``: the health clock
    starts when the process does, so the first start succeeds (#51)."""
    spec = ProcessSpec(name="slowprep", argv=lambda s: [sys.executable, "-c", "import time; time.sleep(60)"],
                       port=lambda s: None, health=lambda s: True, prepare=lambda s: time.sleep(1.5),
                       ready_timeout=lambda s: 1.0, stop_timeout=5)
    settings.run_dir.mkdir(parents=True, exist_ok=True)
    settings.logs_dir.mkdir(parents=True, exist_ok=True)
    out = start_one(settings, spec)
    try:
        assert out.state == "started", out.message
    finally:
        if out.pid:
            stop_process_group(out.pid, 5)


def test_stop_groups_terms_each_group_and_kills_what_stays() -> None:
    """One way to stop the groups radstack started (Druid's and HDFS's nodes, Spark tasks: #52)."""
    from radstack.process_state import stop_groups

    polite = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                                 "signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"],
                                stdout=subprocess.PIPE, start_new_session=True)
    assert stubborn.stdout is not None and stubborn.stdout.readline() == b"ready\n"
    started = time.monotonic()
    assert stop_groups([polite, stubborn], grace_s=1.0) == [True, False]
    assert polite.poll() is not None and stubborn.poll() is not None and time.monotonic() - started < 10


def test_kill_group_takes_the_whole_group_at_once_with_no_term_first(tmp_path: Path) -> None:
    """A crash, for the tests that kill a node (Druid's historical, a Kafka broker, a cluster node): the
    leader and its child go with SIGKILL — no TERM handler runs — and the leader is reaped."""
    log = tmp_path / "group.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", LEADER], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    deadline = time.monotonic() + 20
    while b"child ready" not in log.read_bytes():
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    kill_group(proc)
    assert proc.returncode == -9
    time.sleep(0.2)
    text = log.read_text()
    assert "stopping child" not in text and "child got TERM" not in text
    left = subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True, text=True).stdout.split()
    assert not [pid for pid in left if pid_alive(int(pid))]  # none left (an orphan's zombie awaits init)
