"""A real Spark standalone cluster (one master + N workers) from the installed PySpark's ``spark-class``.

No Spark download is needed: the ``pyspark`` wheel ships ``bin/spark-class`` and every jar of the
master and the worker. Each JVM runs in its own process group, binds to 127.0.0.1 (``--host`` and
``SPARK_LOCAL_IP``, which the web UIs bind to), logs to ``<dir>/logs/spark-{master,worker-N}.log``,
and each worker has its own cores, memory and work dir (where its executors' stdout/stderr land).

    python -m operations.spark_standalone [DIR]      # runs until Ctrl-C, prints the master URL

Jobs reach it as ``spark://127.0.0.1:<port>`` (``spark.master`` in the settings, or
``spark-submit --master``); the master's web UI answers ``/json`` with its workers and applications.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from operations.processes import NodeGroup, free_port, run_until_signal, stop_process_group
from radstack import jvm

MASTER_MAIN = "org.apache.spark.deploy.master.Master"
WORKER_MAIN = "org.apache.spark.deploy.worker.Worker"


class SparkClusterError(RuntimeError):
    """The standalone cluster did not come up (see the log files named in the message)."""


def spark_home() -> Path:
    """The installed PySpark: its ``bin/spark-class`` and ``jars/`` are a Spark distribution."""
    import pyspark  # lazy: only the launcher needs the package's location

    return Path(pyspark.__file__).resolve().parent


def master_state(web_url: str, timeout: float = 5.0) -> dict[str, Any]:
    """The master's ``/json``: ``aliveworkers``, ``workers``, ``activeapps``, ``completedapps`` …"""
    with urllib.request.urlopen(f"{web_url}/json", timeout=timeout) as r:  # noqa: S310 - loopback
        return dict(json.loads(r.read()))


def worker_names(count: int) -> list[str]:
    return [f"worker-{i + 1}" for i in range(count)]


@dataclass
class SparkStandalone(NodeGroup):
    """A master and ``workers`` workers in ``base_dir`` (a fresh temp dir when omitted; removed on stop)."""

    base_dir: Path | None = None
    workers: int = 2
    cores_per_worker: int = 1
    memory_per_worker: str = "2g"
    daemon_heap: str = "256m"
    start_timeout: float = 90.0
    master_port: int = 0
    web_port: int = 0
    start_seconds: float | None = None
    #: on separate hosts: node name (``master``, ``worker-1`` …) → the address it binds, and a worker's
    #: directory (work dir, logs) on its own host (defaults: 127.0.0.1, one directory; where they start
    #: and are checked from: NodeGroup's runner and ready_check)
    addresses: dict[str, str] = field(default_factory=dict)
    node_dirs: dict[str, Path] = field(default_factory=dict)
    #: environment entries for every node (e.g. ``SPARK_MASTER_OPTS``)
    extra_env: dict[str, str] = field(default_factory=dict)
    _own_dir: bool = field(default=False, repr=False)

    def address(self, node: str) -> str:
        return self.addresses.get(node, "127.0.0.1")

    @property
    def master_url(self) -> str:
        return f"spark://{self.address('master')}:{self.master_port}"

    @property
    def web_url(self) -> str:
        return f"http://{self.address('master')}:{self.web_port}"

    @property
    def logs_dir(self) -> Path:
        if self.base_dir is None:
            raise SparkClusterError("the cluster has not been started")
        return self.base_dir / "logs"

    def worker_names(self) -> list[str]:
        return worker_names(self.workers)

    def state(self) -> dict[str, Any]:
        return master_state(self.web_url)

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> SparkStandalone:
        if self.base_dir is None:
            self.base_dir = Path(tempfile.mkdtemp(prefix="radstack-spark-"))
            self._own_dir = True
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        self.master_port = self.master_port or free_port()
        self.web_port = self.web_port or free_port()
        self._spawn("master", MASTER_MAIN, "--host", self.address("master"), "--port", str(self.master_port),
                    "--webui-port", str(self.web_port))  # fmt: skip
        for name in self.worker_names():
            work = self.node_dirs[name] / "work" if name in self.node_dirs else self.base_dir / name
            work.mkdir(parents=True, exist_ok=True)
            self._spawn(name, WORKER_MAIN, "--host", self.address(name), "--port", str(free_port()),
                        "--webui-port", str(free_port()), "--cores", str(self.cores_per_worker),
                        "--memory", self.memory_per_worker, "--work-dir", str(work), self.master_url)  # fmt: skip
        try:
            self._wait_ready()
        except SparkClusterError:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - t0
        return self

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        home = spark_home()
        env.update({
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": "127.0.0.1",  # the web UIs bind here (their default is every interface)
            "SPARK_DAEMON_MEMORY": self.daemon_heap,
            "SPARK_CONF_DIR": str(self.base_dir / "conf"),  # type: ignore[operator]
            "PYSPARK_PYTHON": sys.executable,  # executors run the same interpreter as the driver
        })  # fmt: skip
        java = Path(jvm.java_bin()).resolve()
        env.setdefault("JAVA_HOME", str(java.parent.parent))
        return env

    def _spawn(self, name: str, main: str, *args: str) -> None:
        home = self.node_dirs.get(name, self.base_dir)  # a worker on another host: its own directory there
        assert home is not None
        logs = home / "logs" if name in self.node_dirs else self.logs_dir
        (home / "conf").mkdir(parents=True, exist_ok=True)
        logs.mkdir(parents=True, exist_ok=True)
        env = {**self._env(), **self.extra_env, "SPARK_LOCAL_IP": self.address(name), "SPARK_CONF_DIR": str(home / "conf")}
        cmd = [str(spark_home() / "bin" / "spark-class"), main, *args]
        self._spawn_node(name, cmd, logs / f"spark-{name}.log", env, cwd=home)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            for name, proc in self._procs.items():
                if proc.poll() is not None:
                    raise SparkClusterError(
                        f"spark {name} exited with {proc.returncode}; see {self.logs_dir / f'spark-{name}.log'}")
            try:
                ready, last = self._ready(self._ready_here)
                if ready:
                    return
            except (OSError, ValueError) as e:
                last = repr(e)
            time.sleep(0.3)
        raise SparkClusterError(f"Spark standalone not ready after {self.start_timeout:.0f}s ({last}); "
                                f"logs in {self.logs_dir}")  # fmt: skip

    def _ready_here(self) -> tuple[bool, str]:
        alive = int(self.state().get("aliveworkers", 0))
        return alive >= self.workers, f"{alive} of {self.workers} workers registered"

    def stop(self) -> None:
        for name in [*self.worker_names(), "master"]:
            proc = self._procs.pop(name, None)
            if proc is not None and proc.poll() is None:
                stop_process_group(proc.pid, 20)
            if proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)
        if self._own_dir and self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> SparkStandalone:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    cluster = SparkStandalone(base_dir=Path(args[0]).resolve() if args else None)
    return run_until_signal(cluster.start, cluster.stop, lambda: [
        f"Spark standalone up in {cluster.start_seconds:.1f}s: {cluster.master_url} (UI {cluster.web_url})"])


if __name__ == "__main__":
    raise SystemExit(main())
