"""Process and port helpers for the processes radstack starts (the stack, Kafka, the local clusters):
stop a process group, tell whether a pid still runs, read a log's tail, probe a port or a URL."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from radstack.process_state import kill_group, proc_stat, spawn_group


def writes_to(stream: Any, path: Path) -> bool:
    """Does ``stream`` (a file object) already write to ``path`` (a process started by ``radctl up``,
    whose stderr is its log file)? Then a log handler for ``path`` would write every line twice."""
    try:
        a, b = os.fstat(stream.fileno()), os.stat(path)
    except (OSError, ValueError, AttributeError):
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def stop_process_group(pid: int, timeout: float = 30.0, leader_first: float = 0.0) -> bool:
    """TERM the process group led by ``pid``, wait, then KILL it. True if it stopped before KILL.

    With ``leader_first`` (seconds), only the leader is told first, so it can stop its children itself
    (``radctl stream`` ends its Spark queries before the driver JVM goes, instead of a JVM killed under
    it and hundreds of lines of Py4J errors); the group gets TERM if it is still there after that."""
    try:
        pgid = os.getpgid(pid)
    except ProcessLookupError:
        return True
    if leader_first > 0:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + min(leader_first, timeout)
        while time.monotonic() < deadline:
            _reap(pid)
            if not _group_alive(pgid):
                return True
            time.sleep(0.1)
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(pid)
        if not _group_alive(pgid):
            return True
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    for _ in range(50):
        _reap(pid)
        if not _group_alive(pgid):
            break
        time.sleep(0.1)
    return False


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    for d in Path("/proc").iterdir():  # only zombies left (un-reaped children) → gone
        if d.name.isdigit():
            f = proc_stat(int(d.name))
            if f is not None and int(f[2]) == pgid and f[0] != "Z":
                return True
    return False


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def tail(path: Path, lines: int = 20) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 16384))
            data = fh.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def http_ok(url: str, timeout: float = 1.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - loopback health probe
            return 200 <= r.status < 300
    except Exception:
        return False


def radctl_argv(*args: str) -> list[str]:
    """The command line running ``radctl args…`` with this interpreter."""
    script = Path(sys.executable).parent / "radctl"
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-c", "from operations.cli import app; app()", *args]


# -- the process table ----------------------------------------------------------------------------


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct free ports (each one free when picked)."""
    ports: list[int] = []
    while len(ports) < n:
        p = free_port(host)
        if p not in ports:
            ports.append(p)
    return ports


# -- the nodes of a local cluster -------------------------------------------------------------------


@dataclass
class NodeLaunch:
    """How one node was started: argv, working directory, log file and the environment entries it set
    on top of the launcher's (so another process can start it again: ``radctl cluster start NODE``)."""

    argv: list[str]
    log: str
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    host: int | None = None  # the simulated host it runs on (operations.hosts), None: this machine

    @classmethod
    def of(cls, argv: list[str], log: Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> NodeLaunch:
        extra = {k: v for k, v in (env or {}).items() if os.environ.get(k) != v}
        return cls(list(argv), str(log), str(cwd) if cwd is not None else None, extra)

    def spawn(self) -> subprocess.Popen[bytes]:
        """Start the node again, in its own process group, appending to its log."""
        return spawn_group(self.argv, Path(self.log), env={**os.environ, **self.env}, cwd=self.cwd)


@dataclass
class NodeGroup:
    """The JVMs one launcher started (the HDFS and Spark standalone nodes), by name, each in its own
    process group with its output in its own log file."""

    _procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict, repr=False)
    _launches: dict[str, NodeLaunch] = field(default_factory=dict, repr=False)
    #: starts a node somewhere else (a simulated host: ``operations.hosts``): (name, argv, log, env, cwd)
    runner: Callable[[str, list[str], Path, dict[str, str], Path | None], subprocess.Popen[bytes]] | None = field(
        default=None, repr=False)
    #: readiness checked from where the nodes can be reached (a simulated host): ``(ready, what it saw)``;
    #: None: the group's own check, from here
    ready_check: Callable[[Any], tuple[bool, str]] | None = field(default=None, repr=False)

    def _ready(self, here: Callable[[], tuple[bool, str]]) -> tuple[bool, str]:
        """``(ready, what was seen)`` by ``ready_check`` when one is given, else by ``here``."""
        return self.ready_check(self) if self.ready_check is not None else here()

    def launches(self) -> dict[str, NodeLaunch]:
        """How each node was started (what ``radctl cluster start NODE`` runs again)."""
        return dict(self._launches)

    def pids(self) -> dict[str, int]:
        """Process (group) id of every node still running, by name."""
        return {name: p.pid for name, p in self._procs.items() if p.poll() is None}

    def kill(self, name: str) -> None:
        """SIGKILL one node's process group, as a crash would: no shutdown hook runs."""
        kill_group(self._procs[name])

    def _spawn_node(self, name: str, cmd: list[str], log: Path, env: dict[str, str], cwd: Path | None = None) -> None:
        self._launches[name] = NodeLaunch.of(cmd, log, env, cwd)
        log.parent.mkdir(parents=True, exist_ok=True)
        if self.runner is not None:
            self._procs[name] = self.runner(name, cmd, log, env, cwd)
            return
        self._procs[name] = spawn_group(cmd, log, env=env, cwd=cwd)


def run_until_signal(start: Callable[[], object], stop: Callable[[], None], describe: Callable[[], list[str]]) -> int:
    """A local cluster in the foreground (``python -m operations.…``): start it, print ``describe()``, and
    stop it at SIGINT or SIGTERM (blocked first, so neither can land between the start and the wait)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    start()
    print("\n".join([*describe(), "Ctrl-C stops it."]), flush=True)
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        stop()
    return 0
