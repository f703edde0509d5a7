"""Whether a process runs, read from ``/proc``, and starting and stopping the process groups we start (one
place for every layer: the stack's pid files, the broker's private cache files, the batch layer's in-flight job
records, Druid's and HDFS's local nodes, the Overlord's Spark tasks), and whether something listens on a port."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path


def proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (index 0 = state), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()


def process_start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (with the pid, it names one process)."""
    f = proc_stat(pid)
    return int(f[19]) if f is not None else None


def pid_alive(pid: int, start_time: int | None = None) -> bool:
    """``pid`` runs (not a zombie) and, when given, is the same process (same start time)."""
    f = proc_stat(pid)
    if f is None or f[0] in ("Z", "X"):
        return False
    return start_time is None or int(f[19]) == start_time


def spawn_group(argv: Sequence[str], log: Path, *, env: Mapping[str, str] | None = None,
                cwd: str | os.PathLike[str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a process group of its own (a new session: :func:`stop_groups` and
    :func:`kill_group` reach its children too), stdin from /dev/null, stdout and stderr appended to ``log``.
    ``env``: the whole environment (None: this process's)."""
    with open(log, "ab") as out:
        return subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=dict(env) if env is not None else None, cwd=cwd, start_new_session=True)


def kill_group(proc: subprocess.Popen[bytes], wait_s: float = 10.0) -> None:
    """SIGKILL the process group ``proc`` leads, as a crash would (no TERM first: no shutdown hook runs),
    and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(wait_s)


def stop_groups(procs: Sequence[subprocess.Popen[bytes]], grace_s: float = 15.0) -> list[bool]:
    """TERM the process group each of ``procs`` leads (in the order given: dependants first), wait up to
    ``grace_s`` for them all, then KILL the groups still there. Per process: True if it ended before KILL."""
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    clean = []
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
            clean.append(True)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            clean.append(False)
    return clean


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections on ``host:port`` within ``timeout``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
