"""Whether a process runs, read from ``/proc`` (one place for every layer: the stack's pid files, the
broker's private cache files, the batch layer's in-flight job records)."""

from __future__ import annotations

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
