"""A single-machine Apache Druid assembled from the Maven Central jars in ``.jvm/druid``.

``deploy/jvm/druid/pom.xml`` (profile ``druid``, fetched on demand by :func:`ensure_druid_jars`) brings
``druid-services``, ``druid-kafka-indexing-service`` and ``druid-datasketches``; this module writes one configuration folder
per service and starts, each as its own JVM in its own process group, with logs in files:

* ZooKeeper (``org.apache.zookeeper.server.ZooKeeperServerMain``, shipped with druid-server);
* the Coordinator acting as Overlord (``druid.coordinator.asOverlord.enabled``), which also starts the
  Derby metadata store's network server;
* a Broker, a Historical and an Indexer (tasks run inside it, no peon JVMs);
* optionally a Router.

Everything listens on 127.0.0.1 at free ports; heaps are small enough for 2 cores / 24 GB (about
2.5 GB of heap + direct memory for the whole cluster). Deep storage is a local folder. Extensions are
found on the application class path (``druid.extensions.searchCurrentClassloader``), so no
``extensions/`` tree is needed. Druid's Parquet and HDFS extensions are not on Maven Central, so this
cluster reads JSON/CSV input only (see ``docs/druid-cluster.md``).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from operations.processes import free_port
from radstack import jvm
from radstack.process_state import kill_group, spawn_group, stop_groups

__all__ = ["DruidError", "ServiceSpec", "LocalDruid", "ensure_druid_jars", "JAVA17_FLAGS", "SERVICES"]

DRUID_MODULE = "druid"

#: What Druid's bin/run-java adds on Java 17 (Druid's "Java runtime" docs).
JAVA17_FLAGS = (
    "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=jdk.management/com.sun.management.internal=ALL-UNNAMED",
)


class DruidError(RuntimeError):
    """The local Druid could not be assembled or did not come up."""


@dataclass(frozen=True)
class ServiceSpec:
    name: str  # the argument of `Main server NAME`
    heap: str
    direct: str | None = None
    properties: dict[str, str] = field(default_factory=dict)


PROCESSING = {
    "druid.processing.buffer.sizeBytes": "50000000",
    "druid.processing.numMergeBuffers": "2",
    "druid.processing.numThreads": "1",
    "druid.server.http.numThreads": "12",
}

SERVICES: tuple[ServiceSpec, ...] = (
    ServiceSpec("coordinator", "384m", None, {
        "druid.service": "druid/coordinator",
        "druid.coordinator.startDelay": "PT2S",
        "druid.coordinator.period": "PT2S",
        "druid.coordinator.period.indexingPeriod": "PT60S",
        "druid.manager.segments.pollDuration": "PT2S",
        "druid.coordinator.asOverlord.enabled": "true",
        "druid.coordinator.asOverlord.overlordService": "druid/overlord",
        "druid.indexer.queue.startDelay": "PT1S",
        "druid.indexer.runner.type": "remote",
        "druid.indexer.storage.type": "metadata",
        "druid.server.http.numThreads": "12",
    }),
    ServiceSpec("broker", "512m", "320m", {
        "druid.service": "druid/broker",
        "druid.broker.http.numConnections": "5",
        "druid.broker.cache.useCache": "false",
        "druid.broker.cache.populateCache": "false",
        **PROCESSING,
    }),
    ServiceSpec("historical", "512m", "320m", {
        "druid.service": "druid/historical",
        "druid.historical.cache.useCache": "false",
        "druid.historical.cache.populateCache": "false",
        **PROCESSING,
    }),
    ServiceSpec("indexer", "768m", "320m", {
        "druid.service": "druid/indexer",
        "druid.worker.capacity": "2",
        "druid.indexer.task.restoreTasksOnRestart": "false",
        **PROCESSING,
    }),
)
#: The query path sized to answer fast rather than to start fast (``LocalDruid(tuned=True)``, used by
#: ``benchmarks/bench_vs_druid.py`` and ``bench_batch.py --vs-druid``): processing threads for every core, bigger buffers and heaps. With
#: it the JVMs also run with the full JIT and G1 instead of C1 only and the serial collector.
TUNED: dict[str, tuple[str, str | None, dict[str, str]]] = {
    "broker": ("1g", "768m", {"druid.processing.numThreads": str(os.cpu_count() or 2),
                              "druid.processing.buffer.sizeBytes": "100000000",
                              "druid.broker.http.numConnections": "20"}),
    "historical": ("2g", "1g", {"druid.processing.numThreads": str(os.cpu_count() or 2),
                                "druid.processing.buffer.sizeBytes": "100000000"}),
    # ingestion (benchmarks/bench_batch.py --vs-druid): a heap for maxRowsInMemory rows and the merge
    "indexer": ("3g", "1g", {"druid.processing.numThreads": str(os.cpu_count() or 2)}),
}
ROUTER = ServiceSpec("router", "256m", None, {
    "druid.service": "druid/router",
    "druid.router.managementProxy.enabled": "true",
    "druid.router.http.numConnections": "10",
})

LOG4J2 = """<?xml version="1.0" encoding="UTF-8" ?>
<Configuration status="WARN">
  <Appenders>
    <File name="file" fileName="{log}" append="true">
      <PatternLayout pattern="%d{{ISO8601}} %p [%t] %c - %m%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Root level="info"><AppenderRef ref="file"/></Root>
    <Logger name="org.apache.zookeeper" level="warn" additivity="false"><AppenderRef ref="file"/></Logger>
    <Logger name="org.apache.curator" level="warn" additivity="false"><AppenderRef ref="file"/></Logger>
  </Loggers>
</Configuration>
"""


#: Druid's jars the local cluster needs (a folder fetched before one was added is fetched again)
REQUIRED_JARS = ("druid-services", "druid-kafka-indexing-service", "druid-datasketches")


def ensure_druid_jars(jvm_dir: Path | None = None) -> Path:
    """``.jvm/druid`` with Druid's jars, running Maven (profile ``druid``) once if it is empty."""
    d = jvm.module_dir(DRUID_MODULE, jvm_dir)
    if d.is_dir() and all(any(d.glob(f"{jar}-*.jar")) for jar in REQUIRED_JARS):
        return d
    if not jvm.POM.exists():
        raise DruidError(f"{jvm.POM} is missing")
    cmd = ["mvn", "-q", "-B", "-f", str(jvm.POM), "-Pdruid", "-pl", DRUID_MODULE, "dependency:copy-dependencies"]
    if jvm_dir is not None:
        cmd.insert(-1, f"-Djvm.out={jvm_dir}")
    try:
        subprocess.run(cmd, check=True, cwd=jvm.REPO_ROOT, capture_output=True, text=True)
    except FileNotFoundError as e:
        raise DruidError("Maven (mvn) is not installed; run `make system`") from e
    except subprocess.CalledProcessError as e:
        raise DruidError(f"fetching Druid's jars failed: {' '.join(cmd)}\n{e.stdout[-3000:]}{e.stderr[-2000:]}") from e
    if not any(d.glob("druid-services-*.jar")):
        raise DruidError(f"Maven ran but {d} has no druid-services jar")
    return d



def _properties(props: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in props.items())


class LocalDruid:
    """Configure (:meth:`write_config`), :meth:`start` and :meth:`stop` a single-machine Druid under
    ``base_dir`` (conf/, var/, logs/). Use as a context manager to always stop it."""

    def __init__(self, base_dir: Path, *, jvm_dir: Path | None = None, with_router: bool = False,
                 tuned: bool = False) -> None:
        self.base_dir = Path(base_dir).resolve()
        self.jvm_dir = jvm_dir
        self.tuned = tuned
        services = SERVICES + ((ROUTER,) if with_router else ())
        if tuned:
            services = tuple(ServiceSpec(s.name, TUNED[s.name][0], TUNED[s.name][1], {**s.properties, **TUNED[s.name][2]})
                             if s.name in TUNED else s for s in services)
        self.services: tuple[ServiceSpec, ...] = services
        self.ports: dict[str, int] = {}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    # -- layout -----------------------------------------------------------------------------
    @property
    def conf_dir(self) -> Path:
        return self.base_dir / "conf"

    @property
    def var_dir(self) -> Path:
        return self.base_dir / "var"

    @property
    def logs_dir(self) -> Path:
        return self.base_dir / "logs"

    def url(self, service: str) -> str:
        return f"http://127.0.0.1:{self.ports[service]}"

    @property
    def coordinator_url(self) -> str:
        return self.url("coordinator")

    @property
    def overlord_url(self) -> str:
        """The Coordinator runs the Overlord (asOverlord), so the same URL answers /druid/indexer/v1."""
        return self.url("coordinator")

    @property
    def broker_url(self) -> str:
        return self.url("broker")

    def log_file(self, service: str) -> Path:
        return self.logs_dir / f"{service}.log"

    def common_properties(self) -> dict[str, str]:
        var = self.var_dir
        return {
            "druid.host": "127.0.0.1",
            "druid.bindOnHost": "true",  # listen on druid.host only, not every interface
            "druid.extensions.loadList": "[]",
            "druid.extensions.directory": str(var / "extensions"),
            "druid.extensions.hadoopDependenciesDir": str(var / "hadoop-dependencies"),
            "druid.extensions.searchCurrentClassloader": "true",
            "druid.zk.service.host": f"127.0.0.1:{self.ports['zookeeper']}",
            "druid.zk.paths.base": "/druid",
            "druid.metadata.storage.type": "derby",
            "druid.metadata.storage.connector.connectURI":
                f"jdbc:derby://127.0.0.1:{self.ports['derby']}/{var / 'metadata.db'};create=true",
            "druid.metadata.storage.connector.host": "127.0.0.1",
            "druid.metadata.storage.connector.port": str(self.ports["derby"]),
            "druid.storage.type": "local",
            "druid.storage.storageDirectory": str(var / "deep-storage"),
            "druid.indexer.logs.type": "file",
            "druid.indexer.logs.directory": str(var / "indexing-logs"),
            "druid.indexer.task.baseTaskDir": str(var / "task"),
            "druid.indexer.task.hadoopWorkingPath": str(var / "hadoop-tmp"),
            "druid.selectors.indexing.serviceName": "druid/overlord",
            "druid.selectors.coordinator.serviceName": "druid/coordinator",
            "druid.segmentCache.locations": json.dumps([{"path": str(var / "segment-cache"), "maxSize": "20g"}]),
            "druid.monitoring.monitors": "[]",
            "druid.emitter": "noop",
            "druid.startup.logging.logProperties": "false",
            "druid.sql.enable": "true",
            "druid.lookup.enableLookupSyncOnStartup": "false",
            "druid.server.hiddenProperties": '["druid.s3.accessKey","druid.s3.secretKey","druid.metadata.storage.connector.password"]',
        }

    def write_config(self) -> None:
        """Pick free loopback ports and write conf/{_common,<service>}/… and log4j2 files."""
        for name in ("zookeeper", "derby", *(s.name for s in self.services)):
            self.ports.setdefault(name, free_port())
        for d in (self.conf_dir / "_common", self.var_dir / "zk", self.var_dir / "extensions", self.logs_dir,
                  self.var_dir / "tmp"):
            d.mkdir(parents=True, exist_ok=True)
        (self.conf_dir / "_common" / "common.runtime.properties").write_text(_properties(self.common_properties()))
        for svc in self.services:
            d = self.conf_dir / svc.name
            d.mkdir(parents=True, exist_ok=True)
            props = {**svc.properties, "druid.plaintextPort": str(self.ports[svc.name])}
            (d / "runtime.properties").write_text(_properties(props))
            (d / "log4j2.xml").write_text(LOG4J2.format(log=self.log_file(svc.name)))
        zk = self.conf_dir / "zookeeper"
        zk.mkdir(parents=True, exist_ok=True)
        (zk / "zoo.cfg").write_text(
            f"dataDir={self.var_dir / 'zk'}\nclientPort={self.ports['zookeeper']}\nclientPortAddress=127.0.0.1\n"
            "tickTime=2000\nmaxClientCnxns=0\nadmin.enableServer=false\n4lw.commands.whitelist=ruok\n"
        )
        (zk / "log4j2.xml").write_text(LOG4J2.format(log=self.log_file("zookeeper")))

    # -- processes --------------------------------------------------------------------------
    def _java(self, name: str, heap: str, direct: str | None, classpath: str, main: list[str]) -> list[str]:
        quick_start = [] if self.tuned else ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
        cmd = [jvm.java_bin(), f"-Xms{heap}", f"-Xmx{heap}", *quick_start, "-XX:+ExitOnOutOfMemoryError", "-Duser.timezone=UTC", "-Dfile.encoding=UTF-8",
               f"-Djava.io.tmpdir={self.var_dir / 'tmp'}",
               "-Djava.util.logging.manager=org.apache.logging.log4j.jul.LogManager",
               f"-Dlog4j.configurationFile={self.conf_dir / name / 'log4j2.xml'}", *JAVA17_FLAGS]
        if direct:
            cmd.append(f"-XX:MaxDirectMemorySize={direct}")
        return [*cmd, "-cp", classpath, *main]

    def _spawn(self, name: str, cmd: list[str]) -> None:
        self.procs[name] = spawn_group(cmd, self.logs_dir / f"{name}.stdout.log", cwd=self.base_dir)

    def start(self, timeout_s: float = 420.0) -> None:
        """Start ZooKeeper, then every Druid service; return when all answer /status/health."""
        jars = ensure_druid_jars(self.jvm_dir)
        if not self.ports:
            self.write_config()
        deadline = time.monotonic() + timeout_s
        try:
            self._spawn("zookeeper", self._java(
                "zookeeper", "128m", None, f"{self.conf_dir / 'zookeeper'}:{jars / '*'}",
                ["org.apache.zookeeper.server.ZooKeeperServerMain", str(self.conf_dir / "zookeeper" / "zoo.cfg")]))
            self._wait_zookeeper(deadline)
            # the Coordinator-Overlord starts Derby: the others fail fast without metadata, so it goes first
            first, *rest = self.services
            self._start_service(first, jars)
            self._wait_health(first.name, deadline)
            for svc in rest:
                self._start_service(svc, jars)
            for svc in rest:
                self._wait_health(svc.name, deadline)
        except BaseException:
            self.stop()
            raise

    def _start_service(self, svc: ServiceSpec, jars: Path) -> None:
        cp = os.pathsep.join([str(self.conf_dir / "_common"), str(self.conf_dir / svc.name), str(jars / "*")])
        self._spawn(svc.name, self._java(svc.name, svc.heap, svc.direct, cp,
                                         ["org.apache.druid.cli.Main", "server", svc.name]))

    def _check_alive(self, name: str) -> None:
        proc = self.procs.get(name)
        if proc is not None and proc.poll() is not None:
            raise DruidError(f"Druid {name} exited with code {proc.returncode}; see {self.log_file(name)} "
                             f"and {self.logs_dir / (name + '.stdout.log')}:\n{self.tail(name)}")

    def tail(self, name: str, lines: int = 40) -> str:
        out = []
        for f in (self.log_file(name), self.logs_dir / f"{name}.stdout.log"):
            if f.exists():
                out.extend(f.read_text(errors="replace").splitlines()[-lines:])
        return "\n".join(out)

    def _wait_zookeeper(self, deadline: float) -> None:
        while True:
            self._check_alive("zookeeper")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.ports["zookeeper"]), 1) as s:
                s.sendall(b"ruok")
                if s.recv(4) == b"imok":
                    return
            if time.monotonic() > deadline:
                raise DruidError(f"ZooKeeper did not start; see {self.log_file('zookeeper')}")
            time.sleep(0.3)

    def _wait_health(self, name: str, deadline: float) -> None:
        url = f"{self.url(name)}/status/health"
        while True:
            self._check_alive(name)
            with contextlib.suppress(httpx.HTTPError):
                r = httpx.get(url, timeout=2)
                if r.status_code == 200 and r.text.strip() == "true":
                    return
            if time.monotonic() > deadline:
                raise DruidError(f"Druid {name} did not become healthy; see {self.log_file(name)}:\n{self.tail(name)}")
            time.sleep(0.5)

    def stop(self, grace_s: float = 20.0) -> None:
        """TERM every process group (services first, ZooKeeper last), then KILL what is left."""
        order = [n for n in self.procs if n != "zookeeper"][::-1] + (["zookeeper"] if "zookeeper" in self.procs else [])
        stop_groups([self.procs[n] for n in order], grace_s)
        self.procs.clear()

    def kill_service(self, name: str) -> None:
        """``kill -9`` one service's process group (a host failing, for tests); :meth:`restart_service` brings it back."""
        kill_group(self.procs.pop(name), 30)

    def restart_service(self, name: str, timeout_s: float = 180.0) -> None:
        """Start one service again (same ports and folders) and wait until it is healthy."""
        svc = next(s for s in self.services if s.name == name)
        self._start_service(svc, ensure_druid_jars(self.jvm_dir))
        self._wait_health(name, time.monotonic() + timeout_s)

    def __enter__(self) -> LocalDruid:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- queries (for tests and the docs' examples) ------------------------------------------
    def sql(self, query: str, *, context: dict[str, Any] | None = None, timeout: float = 60.0) -> list[dict[str, Any]]:
        body: dict[str, Any] = {"query": query, "resultFormat": "object"}
        if context:
            body["context"] = context
        r = httpx.post(f"{self.broker_url}/druid/v2/sql", json=body, timeout=timeout)
        if r.status_code != 200:
            raise DruidError(f"Druid SQL failed ({r.status_code}): {r.text[:2000]}")
        return list(r.json())

    def native(self, query: dict[str, Any], *, timeout: float = 60.0) -> Any:
        r = httpx.post(f"{self.broker_url}/druid/v2", json=query, timeout=timeout)
        if r.status_code != 200:
            raise DruidError(f"Druid native query failed ({r.status_code}): {r.text[:2000]}")
        return r.json()
