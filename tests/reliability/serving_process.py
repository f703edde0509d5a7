"""The serving process as an operator runs it (``python -m operations serve``, its own OS process), for
tests that load it, kill it with SIGKILL or stop it with SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from operations.processes import free_port


class ServingProcess:
    def __init__(self, home: Path, cwd: Path | None = None, **env: str) -> None:
        self.home, self.port, self.cwd = home, free_port(), cwd
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> None:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")},
               "RADSTACK_HOME": str(self.home), "RADSTACK_SERVER__PORT": str(self.port), **self.env}
        log = (self.home / f"server-{time.time_ns()}.log").open("wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "operations", "serve"], env=env, stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True, cwd=self.cwd)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(f"{self.url}/status/health", timeout=1).json() is True:
                    return
            except httpx.HTTPError:
                pass
            assert self.proc.poll() is None and time.monotonic() < deadline, f"the server did not start; see {log.name}"
            time.sleep(0.2)

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
