"""A real multi-node cluster on one machine, no containers: 3 Kafka KRaft nodes, an HDFS NameNode with
2 DataNodes (replication 2) and a Spark standalone master with 2 workers — every node its own JVM,
process group, ports (loopback, picked free at start) and data dir under ``<home>/cluster``.

``radctl cluster up|status|down`` drives it; ``up`` also writes ``<home>/cluster/radstack.yaml``, the
settings that point radstack at it (brokers, ``replication_factor: 3``, HDFS deep storage,
``spark.master: spark://…``), so every other command runs on the cluster with
``RADSTACK_CONFIG=<home>/cluster/radstack.yaml``. ``state.json`` beside it records the pids and
ports; ``status`` and ``down`` read it, so they work from any process.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from operations.hdfs_local import HdfsCluster
from operations.hosts import SimulatedHosts
from operations.kafka_broker import KafkaBroker, metadata_ok, new_cluster_id
from operations.processes import NodeLaunch, free_ports, stop_process_group, tail
from operations.spark_standalone import SparkStandalone, master_state
from radstack.process_state import kill_group, pid_alive, process_start_time
from realtime.topics import admin_client

STATE_FILE = "state.json"
# a killed node is fenced (its partitions get new leaders) after 4 s instead of Kafka's default 9 s
FAILOVER = {"broker.heartbeat.interval.ms": 1000, "broker.session.timeout.ms": 4000}
SETTINGS_FILE = "radstack.yaml"


class ClusterError(RuntimeError):
    """The cluster could not be started or is not running."""


@dataclass
class LocalCluster:
    """The nodes of one cluster in ``home/cluster``; :meth:`up` starts them all or none."""

    home: Path
    kafka_nodes: int = 3
    datanodes: int = 2
    spark_workers: int = 2
    kafka_heap: str = "384m"
    jvm_dir: Path | None = None
    brokers: list[KafkaBroker] = field(default_factory=list)
    hdfs: HdfsCluster | None = None
    spark: SparkStandalone | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def dir(self) -> Path:
        return self.home / "cluster"

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap_servers for b in self.brokers)

    @property
    def settings_file(self) -> Path:
        return self.dir / SETTINGS_FILE

    # ---------------------------------------------------------------- lifecycle
    def up(self, timeout: float = 180.0) -> LocalCluster:
        if (self.dir / STATE_FILE).exists() and read_state(self.home)["running"]:
            raise ClusterError(f"a cluster is already running from {self.dir}; `radctl cluster down` first")
        if self.dir.exists():
            shutil.rmtree(self.dir)
        self.dir.mkdir(parents=True)
        try:
            t0 = time.monotonic()
            self._start_kafka(timeout)
            self.timings["kafka"] = time.monotonic() - t0
            t0 = time.monotonic()
            self.hdfs = HdfsCluster(base_dir=self.dir / "hdfs", datanodes=self.datanodes,
                                    replication=min(2, self.datanodes), jvm_dir=self.jvm_dir)  # fmt: skip
            self.hdfs.start()
            self.timings["hdfs"] = time.monotonic() - t0
            t0 = time.monotonic()
            self.spark = SparkStandalone(base_dir=self.dir / "spark", workers=self.spark_workers).start()
            self.timings["spark"] = time.monotonic() - t0
        except Exception:
            self.down()
            raise
        self._write_state()
        return self

    def _start_kafka(self, timeout: float) -> None:
        ports = free_ports(2 * self.kafka_nodes)
        voters = {i + 1: ports[2 * i + 1] for i in range(self.kafka_nodes)}
        cid = new_cluster_id()
        self.brokers = [
            KafkaBroker(home=self.dir / f"kafka-{n}", port=ports[2 * (n - 1)], controller_port=voters[n],
                        heap=self.kafka_heap, jvm_dir=self.jvm_dir, node_id=n, voters=voters, cluster_id=cid,
                        replication=min(3, self.kafka_nodes), extra=FAILOVER)  # fmt: skip
            for n in voters
        ]
        for b in self.brokers:  # a quorum serves only once a majority runs: spawn all, then wait
            b.launch()
        deadline = time.monotonic() + timeout
        for b in self.brokers:
            b.wait_ready(timeout=deadline - time.monotonic())
        while time.monotonic() < deadline:  # every broker registered with the quorum
            if kafka_brokers_registered(self.bootstrap_servers) >= self.kafka_nodes:
                return
            time.sleep(0.2)
        raise ClusterError(f"only {kafka_brokers_registered(self.bootstrap_servers)} of {self.kafka_nodes} "
                           f"Kafka brokers registered within {timeout:.0f}s")  # fmt: skip

    def down(self) -> None:
        if self.spark is not None:
            self.spark.stop()
        if self.hdfs is not None:
            self.hdfs.stop()
        for b in self.brokers:
            b.stop(timeout=20)
        state = self.dir / STATE_FILE
        if state.exists():
            state.unlink()

    def restart_broker(self, node_id: int, timeout: float = 120.0) -> None:
        """Start a (killed) Kafka node again on its ports and data; waits until it serves."""
        b = self.brokers[node_id - 1]
        b.launch()
        b.wait_ready(timeout=timeout)
        self._write_state()

    def kill_broker(self, node_id: int) -> None:
        """SIGKILL one Kafka node, as a crash would (its process group)."""
        b = self.brokers[node_id - 1]
        if b.process is not None:
            kill_group(b.process)
            b.process = None

    # ---------------------------------------------------------------- what others read
    def launches(self) -> dict[str, NodeLaunch]:
        """How every node was started, by the names of :meth:`pids`."""
        return node_launches(self.brokers, self.hdfs, self.spark)

    def pids(self) -> dict[str, int]:
        return node_pids(self.brokers, self.hdfs, self.spark)

    def settings(self) -> dict[str, Any]:
        """The radstack settings that run every job on this cluster."""
        assert self.hdfs is not None and self.spark is not None
        return {
            "home": str(self.home),
            "kafka": {"embedded": False, "bootstrap_servers": self.bootstrap_servers,
                      "replication_factor": min(3, self.kafka_nodes)},
            "deep_storage": self.hdfs.deep_storage_settings("/radstack"),
            # the driver and the executors run this interpreter (its venv has radstack's dependencies)
            "spark": {"master": self.spark.master_url,
                      "conf": {"spark.executor.memory": "1g", "spark.cores.max": str(self.spark_workers),
                               "spark.pyspark.python": sys.executable,
                               "spark.pyspark.driver.python": sys.executable}},
        }  # fmt: skip

    def _write_state(self) -> None:
        assert self.hdfs is not None and self.spark is not None
        write_state(self.home, pids=self.pids(), launches=self.launches(), bootstrap_servers=self.bootstrap_servers,
                    hdfs=self.hdfs, spark=self.spark, settings=self.settings(), timings=self.timings)  # fmt: skip


def node_pids(brokers: Iterable[KafkaBroker], hdfs: HdfsCluster | None, spark: SparkStandalone | None) -> dict[str, int]:
    """Every running node's process (group) id, by the names ``status`` shows: ``kafka-N``, the HDFS
    nodes' own names, ``spark-master``, ``spark-worker-N``."""
    out = {f"kafka-{b.node_id}": b.process.pid for b in brokers if b.process and b.process.poll() is None}
    out.update(hdfs.pids() if hdfs else {})
    out.update({f"spark-{k}": v for k, v in (spark.pids() if spark else {}).items()})
    return out


def node_launches(brokers: Iterable[KafkaBroker], hdfs: HdfsCluster | None,
                  spark: SparkStandalone | None) -> dict[str, NodeLaunch]:
    """How every node was started, by the names of :func:`node_pids`."""
    out = {f"kafka-{b.node_id}": NodeLaunch.of(b.command(), b.out_file, None, b.kafka_dir) for b in brokers}
    out.update(hdfs.launches() if hdfs else {})
    out.update({f"spark-{k}": v for k, v in (spark.launches() if spark else {}).items()})
    return out


def write_state(home: Path, *, pids: dict[str, int], launches: dict[str, NodeLaunch], bootstrap_servers: str,
                hdfs: HdfsCluster, spark: SparkStandalone, settings: dict[str, Any], timings: dict[str, float],
                hosts: SimulatedHosts | None = None) -> None:
    """``cluster/state.json`` (what ``status``, ``down`` and ``start|stop|restart NODE`` read from any
    process) and ``cluster/radstack.yaml`` (the settings that run radstack on the cluster)."""
    cluster_dir = home / "cluster"
    state: dict[str, Any] = {
        "home": str(home),
        "processes": {name: {"pid": pid, "start_time": process_start_time(pid)} for name, pid in pids.items()},
        "launch": {name: asdict(launch) for name, launch in launches.items()},
        "kafka": {"bootstrap_servers": bootstrap_servers, "nodes": len(bootstrap_servers.split(","))},
        "hdfs": {"fs_url": hdfs.fs_url, "webhdfs_url": hdfs.webhdfs_url,
                 "datanodes": hdfs.datanodes, "logs": str(hdfs.logs_dir)},
        "spark": {"master_url": spark.master_url, "web_url": spark.web_url,
                  "workers": spark.workers, "logs": str(spark.logs_dir)},
        "settings_file": str(cluster_dir / SETTINGS_FILE),
        "timings_s": {k: round(v, 1) for k, v in timings.items()},
    }  # fmt: skip
    if hosts is not None:
        state["hosts"] = hosts.to_state()
    write_settings_file(cluster_dir / SETTINGS_FILE, settings,
                        "generated by `radctl cluster up` (operations/cluster.py): radstack on the local cluster")
    _save(home, state)


def write_settings_file(path: Path, settings: dict[str, Any], header: str) -> None:
    """A radstack.yaml only its owner reads (it may hold the metadata store's password)."""
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(f"# {header}\n" + yaml.safe_dump(settings, sort_keys=False))


def _save(home: Path, state: dict[str, Any]) -> None:
    (home / "cluster" / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")


def state_hosts(state: dict[str, Any]) -> SimulatedHosts | None:
    """The simulated hosts a cluster runs on (``radctl cluster up --hosts N``), or None."""
    return SimulatedHosts.from_state(state["hosts"]) if state.get("hosts") else None


#: run on host 1: what a client there sees of the cluster (JSON)
PROBE = """
import json, sys, urllib.request
from confluent_kafka.admin import AdminClient
bootstrap, webhdfs, spark_web = sys.argv[1:4]
out = {}
try:
    out["brokers"] = len(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5).brokers)
except Exception as e:
    out["brokers"] = 0; out["kafka_error"] = repr(e)
def get(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())
if webhdfs != "-":
    try:
        beans = {b["name"]: b for b in get(webhdfs + "/jmx?qry=Hadoop:service=NameNode,*")["beans"]}
        out["live_datanodes"] = int(beans["Hadoop:service=NameNode,name=FSNamesystemState"]["NumLiveDataNodes"])
        out["safemode"] = beans["Hadoop:service=NameNode,name=NameNodeInfo"]["Safemode"]
    except Exception as e:
        out["hdfs_error"] = repr(e)
if spark_web != "-":
    try:
        out["alive_workers"] = int(get(spark_web + "/json").get("aliveworkers", 0))
    except Exception as e:
        out["spark_error"] = repr(e)
print(json.dumps(out))
"""


def probe_from_host(hosts: SimulatedHosts, bootstrap: str, webhdfs: str | None, spark_web: str | None,
                    host: int = 1) -> dict[str, Any]:
    """What a client on ``host`` sees of a cluster on simulated hosts (the machine has no route there):
    ``brokers``, ``live_datanodes``, ``safemode``, ``alive_workers``, or the ``*_error`` it got."""
    out = hosts.run(host, [sys.executable, "-c", PROBE, bootstrap, webhdfs or "-", spark_web or "-"],
                    check=False, timeout=30)  # fmt: skip
    try:
        return dict(json.loads(out.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        return {"error": out.stderr.strip()[-500:]}


def kafka_brokers_registered(bootstrap_servers: str, timeout: float = 3.0) -> int:
    try:
        return len(admin_client(bootstrap_servers).list_topics(timeout=timeout).brokers)
    except Exception:  # noqa: BLE001 - no answer counts as none registered
        return 0


def read_state(home: Path) -> dict[str, Any]:
    """The recorded cluster plus what runs now: each process alive or not, the brokers Kafka lists, the
    DataNodes the NameNode counts live, the workers and applications of the Spark master."""
    path = home / "cluster" / STATE_FILE
    if not path.exists():
        return {"running": False, "processes": {}}
    state: dict[str, Any] = json.loads(path.read_text())
    for info in state["processes"].values():
        info["alive"] = pid_alive(int(info["pid"]), info.get("start_time"))
    state["running"] = any(p["alive"] for p in state["processes"].values())
    bs = state["kafka"]["bootstrap_servers"]
    hosts = state_hosts(state)
    if hosts is not None:  # the machine has no route to the hosts: ask from host 1
        for name, info in state["processes"].items():
            info["host"] = (state.get("launch", {}).get(name) or {}).get("host")
        state["hosts"]["running"] = {str(h): hosts.host_running(h) for h in range(1, hosts.count + 1)}
        seen = probe_from_host(hosts, bs, state["hdfs"]["webhdfs_url"], state["spark"]["web_url"]) \
            if hosts.host_running(1) else {}
        state["kafka"]["brokers_serving"] = seen.get("brokers", 0)
        state["hdfs"]["live_datanodes"] = seen.get("live_datanodes")
        state["spark"].update(alive_workers=seen.get("alive_workers"),
                              master_status="ALIVE" if seen.get("alive_workers") is not None else None)
        return state
    state["kafka"]["brokers_serving"] = sum(1 for b in bs.split(",") if metadata_ok(b, 2.0))
    hdfs = state["hdfs"]
    try:
        hdfs["live_datanodes"] = HdfsCluster.live_datanodes_at(hdfs["webhdfs_url"])
    except OSError:
        hdfs["live_datanodes"] = None
    try:
        m = master_state(state["spark"]["web_url"])
        state["spark"].update(alive_workers=m.get("aliveworkers"), master_status=m.get("status"),
                              active_apps=len(m.get("activeapps", [])),
                              completed_apps=len(m.get("completedapps", [])))  # fmt: skip
    except OSError:
        state["spark"]["master_status"] = None
    return state


def down_from_state(home: Path, timeout: float = 20.0) -> list[str]:
    """Stop every recorded process still running (TERM, then KILL); returns the names stopped."""
    path = home / "cluster" / STATE_FILE
    if not path.exists():
        return []
    state = json.loads(path.read_text())
    stopped = []
    order = sorted(state["processes"].items(), key=lambda kv: (not kv[0].startswith("spark-worker"),
                                                               not kv[0].startswith("spark"), kv[0]))  # fmt: skip
    for name, info in order:
        if pid_alive(int(info["pid"]), info.get("start_time")):
            stop_process_group(int(info["pid"]), timeout)
            stopped.append(name)
    hosts = state_hosts(state)
    if hosts is not None:  # then the hosts themselves: what is left in them, their namespaces
        hosts.down()
    path.unlink()
    return stopped


# ---------------------------------------------------------------- one node (radctl cluster start|stop|restart)


def recorded_state(home: Path) -> dict[str, Any]:
    """``state.json`` as ``up`` wrote it (no probing); :class:`ClusterError` when there is no cluster."""
    path = home / "cluster" / STATE_FILE
    if not path.exists():
        raise ClusterError("no cluster (radctl cluster up starts one)")
    return dict(json.loads(path.read_text()))


def _node(home: Path, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    state = recorded_state(home)
    if name not in state["processes"]:
        raise ClusterError(f"no node {name!r}; the nodes: {', '.join(state['processes'])}")
    return state, state["processes"][name]


def stop_node(home: Path, name: str, timeout: float = 20.0) -> bool:
    """Stop one node (TERM, wait, KILL its process group); False when it was not running."""
    _state, info = _node(home, name)
    if not pid_alive(int(info["pid"]), info.get("start_time")):
        return False
    stop_process_group(int(info["pid"]), timeout)
    return True


def start_node(home: Path, name: str, timeout: float = 120.0) -> int:
    """Start one stopped (or crashed) node again, as ``up`` started it: the same command, data and
    ports. Waits until it runs (a Kafka node: until it answers metadata requests); returns its pid."""
    state, info = _node(home, name)
    if pid_alive(int(info["pid"]), info.get("start_time")):
        raise ClusterError(f"{name} is running (pid {info['pid']})")
    launch = NodeLaunch(**state["launch"][name])
    hosts = state_hosts(state)
    if hosts is not None and launch.host is not None:
        if not hosts.host_running(launch.host):  # the machine died: bring it back first (its disk stays)
            hosts.kill_host(launch.host)
            hosts.start_host(launch.host)
            state["hosts"] = hosts.to_state()
        proc = hosts.spawn(launch.host, launch.argv, Path(launch.log), env={**os.environ, **launch.env},
                           cwd=Path(launch.cwd) if launch.cwd else None)  # fmt: skip
    else:
        proc = launch.spawn()
    state["processes"][name] = {"pid": proc.pid, "start_time": process_start_time(proc.pid)}
    _save(home, state)
    address = None
    if name.startswith("kafka-") and hosts is None:  # on hosts the machine cannot reach it: `status` asks host 1
        address = state["kafka"]["bootstrap_servers"].split(",")[int(name.split("-")[1]) - 1]
    deadline = time.monotonic() + timeout
    settle = time.monotonic() + 3.0  # a JVM with a bad configuration exits within seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ClusterError(f"{name} exited with code {proc.returncode}; see {launch.log}\n{tail(Path(launch.log))}")
        if (metadata_ok(address, 2.0) if address else time.monotonic() >= settle):
            return proc.pid
        time.sleep(0.2)
    raise ClusterError(f"{name} did not come up within {timeout:.0f}s; see {launch.log}")


def restart_node(home: Path, name: str, timeout: float = 120.0) -> int:
    stop_node(home, name)
    return start_node(home, name, timeout)
