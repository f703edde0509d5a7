"""Big statements are planned in worker processes, so that one cannot hold the server's interpreter.

sqlglot parses and rewrites in pure Python: a 128 KiB statement holds the GIL for seconds, and every
other request of the server (a dashboard's small queries, health checks) waits for it. A statement of
at least :data:`OFFLOAD_CHARS` characters is translated by one of ``server.planning_processes`` worker
processes (spawned on first use, so they share no lock or thread with the server; at a lower CPU
priority, so on a busy machine the server's own requests get the cores first); the server's thread
waits for the answer without holding the GIL. Smaller statements, and any statement the translation
memo already holds, are planned in the server process, where they take milliseconds. The worker
raises exactly the errors the server would (a :class:`serving.errors.DruidError` crosses the process
boundary with its category, code and context).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

#: statements at least this long are planned by a worker process (a dashboard's are far shorter)
OFFLOAD_CHARS = 16_384
#: how much lower a worker's CPU priority is than the server's
WORKER_NICENESS = 10

T = TypeVar("T")

_pool: ProcessPoolExecutor | None = None
_size = 0
_lock = threading.Lock()


def _executor(processes: int) -> ProcessPoolExecutor:
    global _pool, _size
    with _lock:
        if _pool is None or _size != processes:
            if _pool is not None:
                _pool.shutdown(wait=False, cancel_futures=True)
            # spawn: a fork of the threaded server could copy a held lock (DuckDB's, the logging module's)
            _pool = ProcessPoolExecutor(max_workers=processes, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_yield_to_the_server)
            _size = processes
        return _pool


def _yield_to_the_server() -> None:
    """A worker runs at a lower CPU priority (nice +10): on a busy machine the server's own requests
    get the cores first, and a big statement waits instead of the dashboards."""
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICENESS)


def run_planning(processes: int, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a worker process (``processes`` of them); a worker that died is replaced once.
    When no worker can be started at all (a program that embeds the server without the
    ``if __name__ == "__main__"`` guard spawning needs), the statement is planned here instead: slower
    for the other requests, but answered — a client's statement never becomes a 5xx for that."""
    global _pool
    for attempt in range(2):
        try:
            return _executor(processes).submit(fn, *args).result()
        except BrokenProcessPool:
            with _lock:
                _pool = None
            if attempt:
                return fn(*args)
        except RuntimeError as e:
            if "bootstrapping phase" not in str(e):
                raise
            with _lock:
                _pool = None
            return fn(*args)
    raise AssertionError("unreachable")  # pragma: no cover


def shutdown() -> None:
    """Stop the worker processes (the server's shutdown)."""
    global _pool
    with _lock:
        if _pool is not None:
            _pool.shutdown(wait=False, cancel_futures=True)
            _pool = None
