"""The multi-node cluster of :mod:`operations.cluster`, each node group on its own simulated host
(:mod:`operations.hosts`): host 1 — a Kafka node, the HDFS NameNode, the Spark master and the metadata
store (PostgreSQL, which every host reaches with a password; radstack's own services and drivers run
there too); hosts 2 … N — a Kafka node, a DataNode and a Spark worker each.

Every node binds its host's address and keeps its files on its host's disk; the nodes are started
in their host's namespaces. The machine itself has no route to the hosts, so every readiness check
runs on host 1 (``probe``), as a client there would see the cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from operations.cluster import (
    FAILOVER,
    SETTINGS_FILE,
    ClusterError,
    node_launches,
    node_pids,
    probe_from_host,
    write_settings_file,
    write_state,
)
from operations.hdfs_local import HdfsCluster, datanode_names
from operations.hosts import SimulatedHosts
from operations.kafka_broker import KafkaBroker, new_cluster_id
from operations.postgres_local import PostgresNode
from operations.processes import NodeLaunch, stop_process_group
from operations.spark_standalone import SparkStandalone, worker_names

KAFKA_PORT, CONTROLLER_PORT, POSTGRES_PORT = 9092, 9093, 5432
METADATA_DATABASE = "radstack"


def host_home(hosts: SimulatedHosts, host: int) -> Path:
    """A host's own radstack home (on its disk): its settings, datasource specs, logs, scratch."""
    return hosts.host_dir(host) / "radstack"


def host_environment(hosts: SimulatedHosts, host: int) -> dict[str, str]:
    """What a radstack command on ``host`` runs with: that host's home and settings, and the host's
    address for Spark (a driver there advertises it to the executors on the other hosts)."""
    home = host_home(hosts, host)
    return {"RADSTACK_HOME": str(home), "RADSTACK_CONFIG": str(home / SETTINGS_FILE),
            "SPARK_LOCAL_IP": hosts.address(host)}  # fmt: skip

@dataclass
class HostCluster:
    """Kafka × N, HDFS (NameNode + N−1 DataNodes) and Spark standalone (master + N−1 workers) on
    ``hosts`` (already up)."""

    hosts: SimulatedHosts
    brokers: dict[int, KafkaBroker] = field(default_factory=dict)
    hdfs: HdfsCluster | None = None
    spark: SparkStandalone | None = None
    metadata: PostgresNode | None = None
    metadata_process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    timings: dict[str, float] = field(default_factory=dict)
    #: node name (as `radctl cluster status` names it) → the host it runs on
    placement: dict[str, int] = field(default_factory=dict)

    @property
    def data_hosts(self) -> list[int]:
        return list(range(2, self.hosts.count + 1))

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap_servers for b in self.brokers.values())

    def node_dir(self, host: int) -> Path:
        return self.hosts.host_dir(host) / "cluster"

    # ---------------------------------------------------------------- probing from host 1
    def probe(self) -> dict[str, Any]:
        webhdfs = self.hdfs.webhdfs_url if self.hdfs is not None and self.hdfs.ports is not None else None
        spark = self.spark.web_url if self.spark is not None and self.spark.web_port else None
        return probe_from_host(self.hosts, self.bootstrap_servers, webhdfs, spark)

    def _wait(self, ready: Any, what: str, timeout: float) -> None:
        deadline, seen = time.monotonic() + timeout, {}
        while time.monotonic() < deadline:
            seen = self.probe()
            if ready(seen):
                return
            time.sleep(0.5)
        raise ClusterError(f"{what} not ready on the hosts within {timeout:.0f}s: {seen}")

    # ---------------------------------------------------------------- lifecycle
    def up(self, timeout: float = 180.0) -> HostCluster:
        try:
            t0 = time.monotonic()
            self.start_kafka(timeout)
            self.timings["kafka"] = time.monotonic() - t0
            t0 = time.monotonic()
            self.start_hdfs()
            self.timings["hdfs"] = time.monotonic() - t0
            t0 = time.monotonic()
            self.start_spark()
            self.timings["spark"] = time.monotonic() - t0
            t0 = time.monotonic()
            self.start_metadata()
            self.timings["metadata"] = time.monotonic() - t0
        except BaseException:
            self.down()
            raise
        return self

    def start_kafka(self, timeout: float = 180.0) -> None:
        hosts = range(1, self.hosts.count + 1)
        voters: dict[int, int | str] = {n: f"{self.hosts.address(n)}:{CONTROLLER_PORT}" for n in hosts}
        cid = new_cluster_id()
        self.brokers = {n: KafkaBroker(home=self.node_dir(n), host=self.hosts.address(n), port=KAFKA_PORT,
                                       controller_port=CONTROLLER_PORT, heap="256m", node_id=n, voters=voters,
                                       cluster_id=cid, replication=min(3, self.hosts.count), extra=FAILOVER)
                        for n in hosts}  # fmt: skip
        for n in hosts:
            self.placement[f"kafka-{n}"] = n
            self.launch_broker(n)
        self._wait(lambda s: s.get("brokers") == len(self.brokers), "Kafka", timeout)

    def launch_broker(self, host: int) -> None:
        """Start (again) the Kafka node of ``host``, on its disk (the same path inside the host)."""
        b = self.brokers[host]
        b.prepare()
        b.process = self.hosts.spawn(host, b.command(), b.out_file, cwd=b.kafka_dir)

    def start_metadata(self, timeout: float = 60.0) -> None:
        """PostgreSQL on host 1, on its address (every host's drivers write segments' metadata there)."""
        host = 1
        self.placement["metadata"] = host
        self.metadata = PostgresNode(self.node_dir(host) / "postgres", address=self.hosts.address(host),
                                     port=POSTGRES_PORT, run=lambda argv: self.hosts.run(host, argv, check=False))  # fmt: skip
        self.metadata.base_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.node_dir(host), 0o711)  # postgres passes through to its own directory (traverse only)
        self.metadata.init()
        self.launch_metadata()
        deadline = time.monotonic() + timeout
        while not self.metadata.ready():
            if self.metadata_process is None or self.metadata_process.poll() is not None \
                    or time.monotonic() > deadline:
                raise ClusterError(f"PostgreSQL did not start on host {host}; see {self.metadata.log_file}")
            time.sleep(0.2)
        self.metadata.create_database(METADATA_DATABASE)

    def launch_metadata(self) -> None:
        assert self.metadata is not None
        self.metadata_process = self.hosts.spawn(self.placement["metadata"], self.metadata.command(),
                                                  self.metadata.log_file)  # fmt: skip

    def pids(self) -> dict[str, int]:
        out = node_pids(self.brokers.values(), self.hdfs, self.spark)
        if self.metadata_process is not None and self.metadata_process.poll() is None:
            out["metadata"] = self.metadata_process.pid
        return out

    def launches(self) -> dict[str, NodeLaunch]:
        """How every node was started, with its host (what ``radctl cluster start NODE`` runs again)."""
        out = node_launches(self.brokers.values(), self.hdfs, self.spark)
        if self.metadata is not None:
            out["metadata"] = NodeLaunch.of(self.metadata.command(), self.metadata.log_file)
        for name, launch in out.items():
            launch.host = self.placement[name]
        return out

    def write_state(self, home: Path) -> None:
        """``state.json`` and the settings in ``home/cluster``, and each host's own copy of the settings in
        its radstack home (as an operator would install them on every machine)."""
        assert self.hdfs is not None and self.spark is not None
        write_state(home, pids=self.pids(), launches=self.launches(), bootstrap_servers=self.bootstrap_servers,
                    hdfs=self.hdfs, spark=self.spark, settings={"home": str(home), **self.settings()},
                    timings=self.timings, hosts=self.hosts)  # fmt: skip
        for host in range(1, self.hosts.count + 1):
            hh = host_home(self.hosts, host)
            hh.mkdir(parents=True, exist_ok=True)
            write_settings_file(hh / SETTINGS_FILE, {"home": str(hh), **self.settings()},
                                f"generated by `radctl cluster up --hosts`: radstack on host {host}")

    def _runner(self, host_of: dict[str, int]) -> Any:
        def run(name: str, cmd: list[str], log: Path, env: dict[str, str], cwd: Path | None) -> Any:
            return self.hosts.spawn(host_of[name], cmd, log, env=env, cwd=cwd)
        return run

    def start_hdfs(self) -> None:
        names = datanode_names(len(self.data_hosts))
        host_of = {"namenode": 1, **dict(zip(names, self.data_hosts, strict=True))}
        self.placement.update(host_of)
        count = len(names)
        self.hdfs = HdfsCluster(
            base_dir=self.node_dir(1) / "hdfs", datanodes=count, replication=min(2, count),
            addresses={name: self.hosts.address(h) for name, h in host_of.items()},
            node_dirs={name: self.node_dir(h) / "hdfs" for name, h in host_of.items() if name != "namenode"},
            runner=self._runner(host_of),
            ready_check=lambda _c: self._ready(lambda s: s.get("live_datanodes") == count and s.get("safemode") == ""),
        )  # fmt: skip
        self.hdfs.start(attempts=1)

    def start_spark(self) -> None:
        workers = len(self.data_hosts)
        host_of = {"master": 1, **dict(zip(worker_names(workers), self.data_hosts, strict=True))}
        self.placement.update({f"spark-{name}": h for name, h in host_of.items()})
        self.spark = SparkStandalone(
            base_dir=self.node_dir(1) / "spark", workers=workers, master_port=7077, web_port=8080,
            # two cores a worker, an application at most one a worker (spark.cores.max in settings()): the
            # streaming job and a rebuild run side by side, as on a cluster sized for both
            cores_per_worker=2, memory_per_worker="3g",
            # a worker whose host died is declared lost after 10 s (Spark's default: 60 s), so its
            # replacement on the same address can register; the workers read the same setting for their
            # heartbeat period (a quarter of it): set on the master only, they beat every 15 s and the
            # master dropped them every 10
            extra_env={"SPARK_MASTER_OPTS": "-Dspark.worker.timeout=10", "SPARK_WORKER_OPTS": "-Dspark.worker.timeout=10"},
            addresses={name: self.hosts.address(h) for name, h in host_of.items()},
            node_dirs={name: self.node_dir(h) / "spark" for name, h in host_of.items() if name != "master"},
            runner=self._runner(host_of),
            ready_check=lambda _c: self._ready(lambda s: s.get("alive_workers") == workers),
        )  # fmt: skip
        self.spark.start()

    def _ready(self, ok: Any) -> tuple[bool, str]:
        seen = self.probe()
        return bool(ok(seen)), json.dumps(seen)

    def down(self) -> None:
        """Stop every node (the hosts stay; :meth:`SimulatedHosts.down` removes them)."""
        if self.metadata_process is not None and self.metadata_process.poll() is None:
            stop_process_group(self.metadata_process.pid, 20)
        if self.spark is not None:
            self.spark.stop()
        if self.hdfs is not None:
            self.hdfs.stop()
        for b in self.brokers.values():
            b.stop(timeout=20)

    def settings(self) -> dict[str, Any]:
        """The radstack settings a process on any host uses to run on this cluster (the metadata store's
        password included: the file is written for the cluster's operator only)."""
        assert self.hdfs is not None and self.spark is not None and self.metadata is not None
        return {
            "metadata": {"url": self.metadata.url(METADATA_DATABASE)},
            "kafka": {"embedded": False, "bootstrap_servers": self.bootstrap_servers,
                      "replication_factor": min(3, self.hosts.count)},
            "deep_storage": self.hdfs.deep_storage_settings("/radstack"),
            "spark": {"master": self.spark.master_url,
                      "conf": {"spark.executor.memory": "1g", "spark.executor.cores": "1",
                               "spark.cores.max": str(len(self.data_hosts)),
                               "spark.pyspark.python": sys.executable,
                               "spark.pyspark.driver.python": sys.executable}},
        }  # fmt: skip
