"""The embedded Apache Kafka broker: one KRaft node (broker + controller) run from the Maven Central jars
in ``.jvm/kafka`` (``radstack.jvm.classpath("kafka")``).

Layout under ``$RADSTACK_HOME``::

    kafka/server.properties    generated on every start (ports and tuning come from the settings)
    kafka/log4j2.properties    Log4j 2 config: everything goes to logs/kafka.log
    kafka/data/                log.dirs (formatted once with kafka.tools.StorageTool; survives restarts)
    logs/kafka.log             the broker's log; logs/kafka.out its stdout/stderr (JVM errors)

:class:`KafkaBroker` prepares (config + one-time format), gives the ``java`` command line (so
``operations.stack`` can supervise it like any other process), and can also start/stop it itself
(:meth:`start` / :meth:`stop`, used by the test fixture).
"""

from __future__ import annotations

import base64
import contextlib
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from operations.processes import port_in_use, stop_process_group, tail
from radstack import jvm
from radstack.config import Settings
from radstack.process_state import port_open, spawn_group
from realtime.topics import admin_client

STORAGE_TOOL = "kafka.tools.StorageTool"  # what kafka-storage.sh runs in Kafka 4.1
SERVER_MAIN = "kafka.Kafka"


class BrokerError(RuntimeError):
    """The embedded broker could not be prepared or did not become ready."""


def new_cluster_id() -> str:
    """A Kafka cluster id: a random UUID, URL-safe base64 without padding (what ``random-uuid`` prints).
    Like Kafka's ``Uuid.randomUuid`` it never starts with ``-`` (a command line would read an option)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def metadata_ok(bootstrap_servers: str, timeout: float = 2.0) -> bool:
    """True when a metadata request through confluent-kafka's AdminClient succeeds and lists a broker."""

    admin = admin_client(bootstrap_servers)
    try:
        md = admin.list_topics(timeout=timeout)
    except Exception:
        return False
    return bool(md.brokers)


LOG4J2_TEMPLATE = """\
status = warn
appender.file.type = RollingFile
appender.file.name = file
appender.file.fileName = {log}
appender.file.filePattern = {log}.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 50MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 3
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.state.name = state.change.logger
logger.state.level = WARN
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = WARN
"""


@dataclass
class KafkaBroker:
    """One KRaft node (broker + controller) whose state lives in ``home/kafka``.

    Alone by default (a standalone quorum of itself). In a multi-node cluster (``operations.cluster``)
    every node gets its own ``home``, its ``node_id``, the shared ``cluster_id`` and the static quorum
    ``voters`` (node id → controller port); ``replication`` then sets the internal topics' and the
    default replication factor, with ``min.insync.replicas`` = 2 once there are 3 replicas or more."""

    home: Path
    port: int = 9092
    controller_port: int = 9093
    host: str = "127.0.0.1"
    heap: str = "512m"
    auto_create_topics: bool = False
    jvm_dir: Path | None = None
    node_id: int = 1
    voters: dict[int, int | str] = field(default_factory=dict)  # node id → controller port, or "host:port"
    cluster_id: str | None = None
    replication: int = 1
    extra: dict[str, Any] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @classmethod
    def from_settings(cls, settings: Settings) -> KafkaBroker:
        return cls(
            home=settings.home,
            port=int(settings.kafka.port),
            controller_port=int(settings.kafka.controller_port),
            heap=str(settings.kafka.heap),
            auto_create_topics=bool(settings.kafka.auto_create_topics),
            jvm_dir=settings.jvm_dir,
        )

    # -- layout -----------------------------------------------------------------------------------
    @property
    def kafka_dir(self) -> Path:
        return self.home / "kafka"

    @property
    def data_dir(self) -> Path:
        return self.kafka_dir / "data"

    @property
    def config_file(self) -> Path:
        return self.kafka_dir / "server.properties"

    @property
    def log4j_file(self) -> Path:
        return self.kafka_dir / "log4j2.properties"

    @property
    def log_file(self) -> Path:
        return self.home / "logs" / "kafka.log"

    @property
    def out_file(self) -> Path:
        return self.home / "logs" / "kafka.out"

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def formatted(self) -> bool:
        return (self.data_dir / "meta.properties").exists()

    # -- configuration ----------------------------------------------------------------------------
    def properties(self) -> dict[str, str]:
        h = self.host
        rf = max(1, self.replication)
        min_isr = 2 if rf >= 3 else 1
        quorum = (
            {"controller.quorum.voters": ",".join(f"{n}@{p}" if isinstance(p, str) else f"{n}@{h}:{p}"
                                                  for n, p in sorted(self.voters.items()))}
            if self.voters
            else {"controller.quorum.bootstrap.servers": f"{h}:{self.controller_port}"}
        )
        props: dict[str, Any] = {
            "process.roles": "broker,controller",
            "node.id": self.node_id,
            **quorum,
            "listeners": f"PLAINTEXT://{h}:{self.port},CONTROLLER://{h}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{h}:{self.port},CONTROLLER://{h}:{self.controller_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": 1,
            "default.replication.factor": rf,
            "offsets.topic.replication.factor": rf,
            "offsets.topic.num.partitions": 4,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": min_isr,
            "transaction.state.log.num.partitions": 4,
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": min_isr,
            "min.insync.replicas": min_isr,
            "group.initial.rebalance.delay.ms": 0,
            "num.network.threads": 2,
            "num.io.threads": 2,
            "num.recovery.threads.per.data.dir": 1,
            "background.threads": 2,
            "log.retention.hours": 168,
            "log.segment.bytes": 256 * 1024 * 1024,
            "auto.create.topics.enable": str(self.auto_create_topics).lower(),
            "delete.topic.enable": "true",
        }
        props.update(self.extra)
        return {k: str(v) for k, v in props.items()}

    def write_config(self) -> Path:
        self.kafka_dir.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        lines = ["# generated by radstack (operations/kafka_broker.py); edits are overwritten"]
        lines += [f"{k}={v}" for k, v in self.properties().items()]
        self.config_file.write_text("\n".join(lines) + "\n")
        self.log4j_file.write_text(LOG4J2_TEMPLATE.format(log=self.log_file))
        return self.config_file

    def _java(self, main: str, *args: str, heap: str | None = None) -> list[str]:
        cmd = [jvm.java_bin()]
        if heap:
            cmd += [f"-Xmx{heap}", f"-Xms{heap}"]
        cmd += [
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.log4j_file}",
            "-Dkafka.logs.dir=" + str(self.log_file.parent),
            "-cp",
            jvm.classpath("kafka", self.jvm_dir),
            main,
            *args,
        ]
        return cmd

    def format_storage(self) -> bool:
        """Format ``log.dirs`` once (standalone KRaft quorum); False when it was already formatted."""
        if self.formatted:
            return False
        self.write_config()
        # a static quorum (controller.quorum.voters) is formatted with the shared id and no --standalone
        quorum_args = [] if self.voters else ["--standalone"]
        cmd = self._java(
            STORAGE_TOOL,
            "format",
            f"--cluster-id={self.cluster_id or new_cluster_id()}",
            "-c",
            str(self.config_file),
            *quorum_args,
        )
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if res.returncode != 0:
            raise BrokerError(f"kafka storage format failed ({res.returncode}): {res.stdout}{res.stderr}")
        return True

    def prepare(self) -> None:
        """Write the config files and format the storage if needed (what must precede :meth:`command`)."""
        self.write_config()
        self.format_storage()

    def command(self) -> list[str]:
        """The ``java … kafka.Kafka server.properties`` command line."""
        return self._java(SERVER_MAIN, str(self.config_file), heap=self.heap)

    def check_ports(self) -> None:
        for name, p in (("kafka.port", self.port), ("kafka.controller_port", self.controller_port)):
            if port_in_use(self.host, p):
                raise BrokerError(
                    f"port {self.host}:{p} ({name}) is already in use by another process; "
                    f"stop it or set {name} (RADSTACK_{name.upper().replace('.', '__')})"
                )

    # -- lifecycle (used by the test fixture; `radctl up` goes through operations.stack) -------------
    def start(self, timeout: float = 90.0) -> float:
        """Start the broker in its own process group and wait until it answers metadata requests.

        Returns the seconds it took (including a first-time format)."""
        t0 = time.monotonic()
        self.launch()
        self.wait_ready(timeout=timeout - (time.monotonic() - t0))
        return time.monotonic() - t0

    def launch(self) -> subprocess.Popen[bytes]:
        """Prepare and spawn the broker in its own process group without waiting for it (the nodes of a
        multi-node quorum must all be up before any of them serves)."""
        self.check_ports()
        self.prepare()
        self.out_file.parent.mkdir(parents=True, exist_ok=True)
        self.process = spawn_group(self.command(), self.out_file, cwd=self.kafka_dir)
        return self.process

    def wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + max(timeout, 1.0)
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise BrokerError(
                    f"kafka exited with code {self.process.returncode}; see {self.log_file} and {self.out_file}\n"
                    + tail(self.out_file)
                )
            if port_open(self.host, self.port, 0.2) and metadata_ok(self.bootstrap_servers, 2.0):
                return
            time.sleep(0.1)
        raise BrokerError(
            f"kafka did not answer metadata requests within {timeout:.0f}s; see {self.log_file}"
        )

    def stop(self, timeout: float = 30.0) -> None:
        if self.process is None:
            return
        stop_process_group(self.process.pid, timeout)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        self.process = None

    def __enter__(self) -> KafkaBroker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
