"""A real HDFS (one NameNode + one or more DataNodes) from the Apache Hadoop jars in ``.jvm/hadoop``.

Used by the test suite (``tests/fixtures/hdfs.py``) and by developers who want a local HDFS:

    python -m operations.hdfs_local [DIR]      # runs until Ctrl-C, prints the URLs

Everything binds to 127.0.0.1 on free ports picked at start: the RPC port (``fs.defaultFS``), the
NameNode HTTP port (WebHDFS, ``/jmx``) and the DataNode's transfer/HTTP/IPC ports. The DataNode
registers as ``127.0.0.1`` so WebHDFS redirects (NameNode → DataNode) stay on loopback. Every JVM runs
in its own process group, logs to ``<dir>/logs/{namenode,datanode}.log`` (``datanode-N.log`` when there
are several: ``datanodes=2, replication=2`` is the multi-node layout of ``operations.cluster``; each
DataNode has its own conf dir with its ports and data dir) and is stopped by :meth:`HdfsCluster.stop`
(TERM, then KILL).
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

from hdfs import HdfsError, InsecureClient

from operations.processes import NodeGroup, free_ports, run_until_signal
from radstack import jvm
from radstack.process_state import stop_groups


class HdfsClusterError(RuntimeError):
    """The cluster did not come up (see the log files named in the message)."""



def _site_xml(props: dict[str, str]) -> str:
    rows = "\n".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>" for k, v in props.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{rows}\n</configuration>\n'


LOG4J = """\
log4j.rootLogger=INFO,console
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.target=System.err
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %p %c{2}: %m%n
log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR
"""

# Jersey 1 / JAXB (WebHDFS) and Hadoop's RPC reflect into java.base; Hadoop's own launcher scripts pass
# the same flags on Java 17.
JAVA17_OPENS = [
    f"--add-opens=java.base/{pkg}=ALL-UNNAMED"
    for pkg in (
        "java.lang",
        "java.lang.reflect",
        "java.io",
        "java.net",
        "java.nio",
        "java.util",
        "java.util.concurrent",
        "sun.nio.ch",
        "sun.net.dns",
        "sun.net.util",
        "sun.security.x509",
    )
]

def _jmx(webhdfs_url: str, query: str) -> dict[str, object]:
    """One bean of the NameNode's ``/jmx``."""
    with urllib.request.urlopen(f"{webhdfs_url}/jmx?qry={query}", timeout=5) as r:  # noqa: S310 - loopback
        beans = json.loads(r.read())["beans"]
    return beans[0] if beans else {}


WEB_XML = """\
<?xml version="1.0" encoding="UTF-8"?>
<web-app xmlns="http://xmlns.jcp.org/xml/ns/javaee" version="3.1"></web-app>
"""


@dataclass
class DataNodePorts:
    xfer: int
    http: int
    ipc: int


@dataclass
class HdfsPorts:
    rpc: int
    http: int
    datanodes: list[DataNodePorts]

    @classmethod
    def pick(cls, datanodes: int = 1) -> HdfsPorts:
        ports = free_ports(2 + 3 * datanodes)
        dns = [DataNodePorts(*ports[2 + 3 * i: 5 + 3 * i]) for i in range(datanodes)]
        return cls(ports[0], ports[1], dns)


def datanode_names(count: int) -> list[str]:
    """The DataNodes' names: ``datanode`` alone, else ``datanode-1`` … ``datanode-N``."""
    return ["datanode"] if count == 1 else [f"datanode-{i + 1}" for i in range(count)]


@dataclass
class HdfsCluster(NodeGroup):
    """A single-node HDFS in ``base_dir`` (a fresh temp dir when omitted; removed on stop then)."""

    base_dir: Path | None = None
    heap: str = "384m"
    datanodes: int = 1
    replication: int = 1
    user: str = field(default_factory=getpass.getuser)
    jvm_dir: Path | None = None
    start_timeout: float = 120.0
    ports: HdfsPorts | None = None
    start_seconds: float | None = None
    #: on separate hosts: node name (``namenode``, ``datanode-1`` …) → the address it binds and
    #: registers with, and a DataNode's directory (data, conf, logs) on its own host (defaults:
    #: 127.0.0.1, one directory; where they start and are checked from: NodeGroup's runner and ready_check)
    addresses: dict[str, str] = field(default_factory=dict)
    node_dirs: dict[str, Path] = field(default_factory=dict)
    _own_dir: bool = field(default=False, repr=False)

    # ---------------------------------------------------------------- addresses
    @property
    def fs_url(self) -> str:
        """``fs.defaultFS`` — what Spark and the Hadoop client use (``hdfs://127.0.0.1:PORT``)."""
        return f"hdfs://{self.address('namenode')}:{self._ports.rpc}"

    @property
    def webhdfs_url(self) -> str:
        """The NameNode HTTP address (WebHDFS at ``/webhdfs/v1``), for ``hdfs.InsecureClient``."""
        return f"http://{self.address('namenode')}:{self._ports.http}"

    def address(self, node: str) -> str:
        return self.addresses.get(node, "127.0.0.1")

    @property
    def conf_dir(self) -> Path:
        return self._dir / "conf"

    def datanode_names(self) -> list[str]:
        return datanode_names(self.datanodes)

    def _datanode_conf_dir(self, i: int) -> Path:
        name = self.datanode_names()[i]
        if name in self.node_dirs:
            return self.node_dirs[name] / "conf"
        return self.conf_dir if self.datanodes == 1 else self._dir / f"conf-{name}"

    def _datanode_data_dir(self, i: int) -> Path:
        name = self.datanode_names()[i]
        if name in self.node_dirs:
            return self.node_dirs[name] / "data"
        return self._dir / ("data" if self.datanodes == 1 else f"data-{name}")

    def _log_dir(self, node: str) -> Path:
        return self.node_dirs[node] / "logs" if node in self.node_dirs else self.logs_dir

    def live_datanodes(self) -> int:
        """DataNodes the NameNode counts as live (its ``/jmx``)."""
        return self.live_datanodes_at(self.webhdfs_url)

    @staticmethod
    def live_datanodes_at(webhdfs_url: str) -> int:
        state = _jmx(webhdfs_url, "Hadoop:service=NameNode,name=FSNamesystemState")
        return int(str(state.get("NumLiveDataNodes", 0)))


    @property
    def logs_dir(self) -> Path:
        return self._dir / "logs"

    @property
    def _dir(self) -> Path:
        if self.base_dir is None:
            raise HdfsClusterError("the cluster has not been started")
        return self.base_dir

    @property
    def _ports(self) -> HdfsPorts:
        if self.ports is None:
            raise HdfsClusterError("the cluster has not been started")
        return self.ports

    def deep_storage_settings(self, path: str = "/radstack") -> dict[str, str]:
        """The ``deep_storage`` settings block pointing radstack at this cluster."""
        return {
            "type": "hdfs",
            "path": path,
            "namenode_url": self.webhdfs_url,
            "hdfs_fs_url": self.fs_url,
            "user": self.user,
        }

    # ---------------------------------------------------------------- lifecycle
    def start(self, attempts: int = 3) -> HdfsCluster:
        """Format and start; retried with new ports when one was taken between pick and bind."""
        if self.base_dir is None:
            self.base_dir = Path(tempfile.mkdtemp(prefix="radstack-hdfs-"))
            self._own_dir = True
        self.base_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        last: Exception | None = None
        for _ in range(attempts):
            self.ports = HdfsPorts.pick(self.datanodes)
            try:
                self._start_once()
                self.start_seconds = time.monotonic() - t0
                return self
            except HdfsClusterError as e:
                last = e
                self._stop_processes()
                if not self._port_clash():
                    break
        raise HdfsClusterError(f"HDFS did not start: {last}")

    def _start_once(self) -> None:
        self._write_conf()
        name_dir = self._dir / "name"
        if name_dir.exists():
            shutil.rmtree(name_dir)
        for data_dir in [*self._dir.glob("data*"), *(self._datanode_data_dir(i) for i in range(self.datanodes))]:
            shutil.rmtree(data_dir, ignore_errors=True)
        for logs in {self.logs_dir, *(self._log_dir(n) for n in self.datanode_names())}:
            shutil.rmtree(logs, ignore_errors=True)
            logs.mkdir(parents=True)
        fmt_log = self.logs_dir / "format.log"
        with fmt_log.open("wb") as out:
            rc = subprocess.run(
                self._java_cmd(
                    "org.apache.hadoop.hdfs.server.namenode.NameNode", "-format", "-nonInteractive"
                ),
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self._env(),
                timeout=self.start_timeout,
                start_new_session=True,
            ).returncode
        if rc != 0:
            raise HdfsClusterError(f"NameNode -format failed (exit {rc}); see {fmt_log}")
        self._spawn("namenode", "org.apache.hadoop.hdfs.server.namenode.NameNode")
        for i, name in enumerate(self.datanode_names()):
            self._spawn(name, "org.apache.hadoop.hdfs.server.datanode.DataNode", self._datanode_conf_dir(i))
        self._wait_ready()

    def _spawn(self, name: str, main_class: str, conf_dir: Path | None = None) -> None:
        logs = self._log_dir(name)
        self._spawn_node(name, self._java_cmd(main_class, conf_dir=conf_dir, logs=logs), logs / f"{name}.log",
                         self._env())  # fmt: skip

    def _java_cmd(self, main_class: str, *args: str, conf_dir: Path | None = None, logs: Path | None = None) -> list[str]:
        conf = conf_dir or self.conf_dir
        cp = f"{conf}{os.pathsep}{jvm.classpath('hadoop', self.jvm_dir)}"
        return [
            jvm.java_bin(),
            f"-Xmx{self.heap}",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.net.preferIPv4Stack=true",
            *JAVA17_OPENS,
            f"-Dhadoop.log.dir={logs or self.logs_dir}",
            f"-Dhadoop.home.dir={self._dir}",
            f"-Dlog4j.configuration=file:{conf / 'log4j.properties'}",
            f"-Duser.name={self.user}",
            "-cp",
            cp,
            main_class,
            *args,
        ]

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["HADOOP_CONF_DIR"] = str(self.conf_dir)
        env["HADOOP_USER_NAME"] = self.user
        env.pop("HADOOP_HOME", None)
        return env

    def _write_conf(self) -> None:
        p = self._ports
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        nn = self.address("namenode")
        core = {
            "fs.defaultFS": f"hdfs://{nn}:{p.rpc}",
            "hadoop.tmp.dir": str(self._dir / "tmp"),
            "hadoop.security.authentication": "simple",
            "hadoop.http.staticuser.user": self.user,
        }
        hdfs = {
            "dfs.replication": str(self.replication),
            "dfs.namenode.name.dir": (self._dir / "name").as_uri(),
            "dfs.permissions.enabled": "false",
            "dfs.webhdfs.enabled": "true",
            "dfs.namenode.rpc-address": f"{nn}:{p.rpc}",
            "dfs.namenode.rpc-bind-host": nn,
            "dfs.namenode.http-address": f"{nn}:{p.http}",
            "dfs.namenode.http-bind-host": nn,
            "dfs.namenode.https-address": f"{nn}:0",
            "dfs.namenode.secondary.http-address": f"{nn}:0",
            "dfs.namenode.secondary.https-address": f"{nn}:0",
            "dfs.namenode.backup.address": f"{nn}:0",
            "dfs.namenode.backup.http-address": f"{nn}:0",
            "dfs.datanode.https.address": "127.0.0.1:0",
            "dfs.datanode.hostname": "127.0.0.1",
            "dfs.datanode.use.datanode.hostname": "true",
            "dfs.client.use.datanode.hostname": "true",
            "dfs.namenode.datanode.registration.ip-hostname-check": "false",
            "dfs.namenode.safemode.extension": "0",
            "dfs.namenode.safemode.min.datanodes": "0",
            "dfs.heartbeat.interval": "1",
            # a DataNode silent for 3 s is "stale": reads try its replicas last (WebHDFS redirects too) and
            # writes avoid it, long before the NameNode declares it dead (heartbeat recheck below)
            "dfs.namenode.stale.datanode.interval": "3000",
            "dfs.namenode.avoid.read.stale.datanode": "true",
            "dfs.namenode.avoid.write.stale.datanode": "true",
            "dfs.namenode.heartbeat.recheck-interval": "10000",
            "dfs.datanode.du.reserved": "0",
            "dfs.namenode.resource.du.reserved": str(16 * 1024 * 1024),
            "dfs.namenode.handler.count": "4",
            "dfs.datanode.handler.count": "4",
            "dfs.blocksize": str(32 * 1024 * 1024),
            "dfs.namenode.fs-limits.min-block-size": str(1024 * 1024),
        }
        # With one DataNode it shares the NameNode's conf dir; several each get their own (ports, data dir).
        for i, name in enumerate(self.datanode_names()):
            dn, addr = p.datanodes[i], self.address(name)
            hdfs_dn = {
                **hdfs,
                "dfs.datanode.data.dir": self._datanode_data_dir(i).as_uri(),
                "dfs.datanode.address": f"{addr}:{dn.xfer}",
                "dfs.datanode.http.address": f"{addr}:{dn.http}",
                "dfs.datanode.ipc.address": f"{addr}:{dn.ipc}",
                "dfs.datanode.https.address": f"{addr}:0",
                "dfs.datanode.hostname": addr,
            }
            core_dn = {**core, "hadoop.tmp.dir": str(self.node_dirs[name] / "tmp")} if name in self.node_dirs else core
            self._write_conf_dir(self._datanode_conf_dir(i), core_dn, hdfs_dn)
        if self.datanodes > 1:
            self._write_conf_dir(self.conf_dir, core, hdfs)

    @staticmethod
    def _write_conf_dir(conf_dir: Path, core: dict[str, str], hdfs: dict[str, str]) -> None:
        conf_dir.mkdir(parents=True, exist_ok=True)
        (conf_dir / "core-site.xml").write_text(_site_xml(core))
        (conf_dir / "hdfs-site.xml").write_text(_site_xml(hdfs))
        (conf_dir / "log4j.properties").write_text(LOG4J)
        # The Maven Central jars do not carry the NameNode/DataNode web UIs (the binary tarball does);
        # HttpServer2 only needs the webapp folders to exist on the classpath. WebHDFS and /jmx are
        # servlets registered in code, so empty webapps serve them fine.
        for app in ("hdfs", "datanode", "static"):
            web_inf = conf_dir / "webapps" / app / "WEB-INF"
            web_inf.mkdir(parents=True, exist_ok=True)
            (web_inf / "web.xml").write_text(WEB_XML)

    def _port_clash(self) -> bool:
        """Whether a failed start was a port taken between picking and binding (worth a retry)."""
        for log in self.logs_dir.glob("*.log"):
            text = log.read_text(errors="replace")
            if "BindException" in text or "Address already in use" in text:
                return True
        return False

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            for name, proc in self._procs.items():
                if proc.poll() is not None:
                    raise HdfsClusterError(
                        f"{name} exited with {proc.returncode}; see {self._log_dir(name) / (name + '.log')}"
                    )
            try:
                ready, last = self._ready(self._ready_here)
                if ready:
                    return
            except (OSError, urllib.error.URLError, ValueError, KeyError, IndexError) as e:
                last = repr(e)
            time.sleep(0.3)
        raise HdfsClusterError(
            f"HDFS not ready after {self.start_timeout:.0f}s ({last}); logs in {self.logs_dir}"
        )

    def _ready_here(self) -> tuple[bool, str]:
        live = self.live_datanodes()
        info = _jmx(self.webhdfs_url, "Hadoop:service=NameNode,name=NameNodeInfo")
        safemode = str(info.get("Safemode", "?"))
        ready = live >= self.datanodes and safemode == "" and self._probe_write()
        return ready, f"live datanodes={live}, safemode={safemode!r}"

    def _probe_write(self) -> bool:
        """A WebHDFS create through the DataNode proves the write path end to end."""

        client = InsecureClient(self.webhdfs_url, user=self.user, timeout=10)
        try:
            client.write("/.radstack-probe", data=b"ok", overwrite=True)
            client.delete("/.radstack-probe")
        except (HdfsError, OSError):
            return False
        return True

    def _stop_processes(self) -> None:
        stop_groups([proc for _, proc in reversed(list(self._procs.items()))], 15)  # the DataNode first
        self._procs.clear()

    def stop(self) -> None:
        self._stop_processes()
        if self._own_dir and self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> HdfsCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    cluster = HdfsCluster(base_dir=Path(args[0]).resolve() if args else None)
    return run_until_signal(cluster.start, cluster.stop, lambda: [
        f"HDFS up in {cluster.start_seconds:.1f}s", f"  fs.defaultFS  {cluster.fs_url}",
        f"  WebHDFS       {cluster.webhdfs_url}/webhdfs/v1", f"  conf / logs   {cluster.conf_dir} / {cluster.logs_dir}"])


if __name__ == "__main__":
    raise SystemExit(main())
