"""Simulated hosts (#36): three Linux network + mount namespaces on a private bridge in 198.18.0.0/24
(operations/hosts.py), the cluster on them (operations/host_cluster.py) and radstack's whole path across
them.

* a host reaches another host's address, and its own loopback is its own;
* no host has a route out of the bridge, and the machine itself has no route to the hosts (checked
  with ``ip route get``: nothing is sent);
* a host's /tmp and home are its own; the project tree is there, read-only;
* killing a host SIGKILLs every process in it at once and removes its namespace; it comes back with
  the same address and disk, an empty /tmp;
* ``down`` leaves no namespace, link or process behind, also when the test body fails;
* ``radctl cluster up --hosts 3`` places every node on its host; the whole Lambda path (receiver,
  archiver, stream, rebuild, server) survives host 2 dying under it, and the streaming driver moves
  to host 3 from its checkpoint in HDFS: every count exact.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from operations.hosts import REPO, SimulatedHosts, leftover_namespaces, processes_in_netns
from tests.cluster.conftest import REPORT

pytestmark = [pytest.mark.slow, pytest.mark.cluster,
              pytest.mark.skipif(sys.platform != "linux", reason="Linux namespaces")]

PY = sys.executable
SERVE = "import socket,sys; s=socket.create_server((sys.argv[1], 7070)); c,_=s.accept(); c.sendall(b'hello from '+sys.argv[1].encode()); c.close()"
ASK = "import socket,sys; print(socket.create_connection((sys.argv[1], 7070), timeout=5).recv(64).decode())"


def test_hosts_share_only_the_network_and_the_image(tmp_path: Path) -> None:
    hosts = SimulatedHosts(3, tmp_path / "hosts")
    with hosts:
        # each host has its address; 2 reaches 3 over the bridge
        assert hosts.address(1) == "198.18.0.11"
        assert "198.18.0.13/24" in hosts.run(3, ["ip", "-o", "addr", "show", "eth0"]).stdout
        server = subprocess.Popen(hosts.command(3, [PY, "-c", SERVE, hosts.address(3)]))
        try:
            for _ in range(50):
                out = hosts.run(2, [PY, "-c", ASK, hosts.address(3)], check=False)
                if out.returncode == 0:
                    break
            assert out.stdout.strip() == "hello from 198.18.0.13", out.stderr
        finally:
            server.wait(timeout=10)
        # no way out: only the bridge's subnet is routed, inside and outside the hosts
        assert hosts.run(1, ["ip", "route"]).stdout.strip().splitlines() == [
            "198.18.0.0/24 dev eth0 proto kernel scope link src 198.18.0.11"]
        assert "unreachable" in hosts.run(1, ["ip", "route", "get", "192.0.2.1"], check=False).stderr.lower()
        outside = subprocess.run(["ip", "route", "get", hosts.address(1)], capture_output=True, text=True)
        assert f"rs{hosts.tag}" not in outside.stdout  # the machine has no link on the bridge
        # own /tmp and home; the project tree read-only
        disk1, disk2 = hosts.host_dir(1) / "disk", hosts.host_dir(2) / "disk"
        hosts.run(1, ["sh", "-c", f"echo one > /tmp/mine && echo one > {disk1}"])
        assert hosts.run(2, ["ls", "/tmp/mine"], check=False).returncode != 0
        assert not Path("/tmp/mine").exists()
        assert disk1.read_text() == "one\n"  # the same path outside the host
        assert hosts.run(2, ["cat", str(disk1)], check=False).returncode != 0  # host 1's disk is not on host 2
        assert hosts.run(2, ["ls", "-A", str(hosts.base_dir)]).stdout.split() == ["h2"]
        assert hosts.run(2, ["test", "-x", PY]).returncode == 0
        denied = hosts.run(2, ["touch", str(REPO / "written-by-a-host")], check=False)
        assert denied.returncode != 0 and "read-only" in denied.stderr.lower()

        # a host dies: every process at once, its namespace gone; it comes back with its disk
        sleepers = [hosts.spawn(2, ["sleep", "600"], tmp_path / "sleep.log") for _ in range(3)]
        deadline = time.monotonic() + 10  # the sleepers and the host's holder, once nsenter has entered
        while len(processes_in_netns(hosts.netns(2))) < 4:
            assert time.monotonic() < deadline, processes_in_netns(hosts.netns(2))
            time.sleep(0.05)
        killed = hosts.kill_host(2)
        assert all(p.wait(timeout=10) == -9 or p.returncode != 0 for p in sleepers)
        assert len(killed) >= 4 and hosts.netns(2) not in leftover_namespaces(hosts.tag)
        assert hosts.run(1, [PY, "-c", ASK, hosts.address(2)], check=False).returncode != 0
        hosts.start_host(2)
        assert hosts.run(2, ["cat", str(disk2)], check=False).returncode != 0  # host 2 never wrote one
        hosts.run(2, ["sh", "-c", f"echo two > {disk2} && touch /tmp/before-death"])
        hosts.kill_host(2)
        hosts.start_host(2)
        assert hosts.run(2, ["cat", str(disk2)]).stdout == "two\n"  # the disk survived
        assert hosts.run(2, ["test", "-e", "/tmp/before-death"], check=False).returncode == 1  # /tmp did not
    assert leftover_namespaces(hosts.tag) == []
    assert hosts.tag not in subprocess.run(["ip", "link"], capture_output=True, text=True).stdout


def test_a_failing_body_still_removes_everything(tmp_path: Path) -> None:
    hosts = SimulatedHosts(2, tmp_path / "hosts")
    with pytest.raises(RuntimeError, match="the test failed"), hosts:
        sleeper = hosts.spawn(1, ["sleep", "600"], tmp_path / "sleep.log")
        raise RuntimeError("the test failed")
    assert sleeper.wait(timeout=10) != 0
    assert leftover_namespaces(hosts.tag) == []


#: run on host 1: post events [first, first+n) to the receiver in batches of 100, timestamps from ``ts0``
#: 200 ms apart; a batch answered 5xx (or not at all) is sent again (the same ids). Prints JSON.
POST = """
import json, os, sys, time, httpx
url, first, n, ts0, pause = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
hold = sys.argv[6] if len(sys.argv) > 6 else ""  # the second half waits while this file exists (10 min at most)
accepted, resent, statuses, began = 0, 0, {}, time.monotonic()
with httpx.Client(timeout=120) as c:
    for b in range(first, first + n, 100):
        while hold and b >= first + n // 2 and os.path.exists(hold) and time.monotonic() - began < 600:
            time.sleep(0.2)
        body = json.dumps([{"id": f"e{i}", "timestamp": ts0 + (i - first) * 200, "page": f"/p{i % 7}", "bytes": i % 100}
                           for i in range(b, min(b + 100, first + n))])
        while True:
            try:
                r = c.post(url, content=body.encode(), headers={"content-type": "application/json"})
                statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
                if r.status_code == 200:
                    accepted += r.json()["accepted"]
                    break
                if r.status_code < 500:  # refused for good: a test error, not a fault to ride out
                    sys.exit(f"{r.status_code}: {r.text[:500]}")
            except httpx.HTTPError as e:
                statuses[type(e).__name__] = statuses.get(type(e).__name__, 0) + 1
            resent += 1
            time.sleep(1)
        time.sleep(pause)
print(json.dumps({"accepted": accepted, "resent": resent, "statuses": statuses}))
"""
#: run on a host: a Druid SQL query to the server on host 1's loopback; prints the rows as JSON
SQL = """
import json, sys, httpx
r = httpx.post("http://127.0.0.1:8888/druid/v2/sql", json={"query": sys.argv[1]}, timeout=60)
print(json.dumps(r.json() if r.status_code == 200 else {"status": r.status_code, "body": r.text[:300]}))
"""
#: run on a host: every event id the archive of a topic holds, read back from deep storage (HDFS)
ARCHIVED = """
import io, json, sys, orjson, pyarrow.parquet as pq
from radstack.config import load_settings
from radstack.storage.deep_storage import open_deep_storage
from radstack.storage.raw_archive import topic_prefix
storage, ids = open_deep_storage(load_settings()), []
for key in storage.list(topic_prefix(sys.argv[1])):
    if key.endswith(".parquet"):
        # ParquetFile, not read_table: pyarrow 26's dataset reader over an in-memory file aborts the
        # interpreter at exit in about one run in five ("terminate called without an active exception")
        table = pq.ParquetFile(io.BytesIO(storage.get_bytes(key))).read(columns=["value"])
        ids += [orjson.loads(v)["id"] for v in table.column("value").to_pylist()]
print(json.dumps({"records": len(ids), "distinct": len(set(ids))}))
"""
HOUR = 3_600_000


class OnHosts:
    """The cluster of ``radctl cluster up --hosts 3`` as the tests drive it: ``radctl cluster …`` from
    the machine, commands on a host through ``radctl cluster exec`` (the host's home, settings and
    address for Spark)."""

    def __init__(self, home: Path, logs: Path) -> None:
        self.home, self.logs = home, logs
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")} | {"RADSTACK_HOME": str(home)}
        self.hosts: SimulatedHosts | None = None
        self.state: dict = {}  # type: ignore[type-arg]
        self.started: list[subprocess.Popen[bytes]] = []

    def radctl(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([PY, "-m", "operations", "cluster", *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=False)  # fmt: skip

    def status(self) -> dict:  # type: ignore[type-arg]
        return dict(orjson.loads(self.radctl("status", "--json").stdout))

    def _exec(self, host: int, argv: list[str]) -> list[str]:
        return [PY, "-m", "operations", "cluster", "exec", "--host", str(host), "--", *argv]

    def spawn(self, host: int, argv: list[str], name: str, **env: str) -> subprocess.Popen[bytes]:
        """A long-running command on ``host`` (its own process group; output in ``logs/name.log``)."""
        with open(self.logs / f"{name}.log", "ab") as out:
            p = subprocess.Popen(self._exec(host, argv), env=self.env | env, stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        self.started.append(p)
        return p

    def run(self, host: int, argv: list[str], timeout: float = 120, **env: str) -> str:
        out = subprocess.run(self._exec(host, argv), env=self.env | env, capture_output=True, text=True,
                             timeout=timeout, check=False)  # fmt: skip
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
        return out.stdout

    def sql(self, query: str) -> Any:
        return orjson.loads(self.run(1, [PY, "-c", SQL, query]).strip().splitlines()[-1])

    def stop_all(self) -> None:
        for p in self.started:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=20)


@pytest.fixture(scope="module")
def on_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OnHosts]:
    """`radctl cluster up --hosts 3` for the module; `radctl cluster down` at the end must leave no
    namespace behind."""
    tmp = tmp_path_factory.mktemp("hosts")
    (tmp / "logs").mkdir()
    c = OnHosts(tmp / "home", tmp / "logs")
    try:
        up = c.radctl("up", "--hosts", "3", timeout=600)
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        c.state = c.status()
        c.hosts = SimulatedHosts.from_state(c.state["hosts"])
        yield c
    finally:
        c.stop_all()
        down = c.radctl("down")
        if c.hosts is not None:
            c.hosts.down()  # whatever `down` could not reach
    assert down.returncode == 0 and "stopped" in down.stdout, down.stdout + down.stderr
    assert c.hosts is not None and leftover_namespaces(c.hosts.tag) == []


def test_the_cluster_on_three_hosts(on_hosts: OnHosts) -> None:
    """`radctl cluster up --hosts 3`: Kafka ×3, HDFS (NameNode on host 1, a DataNode on hosts 2 and 3),
    Spark standalone (master on host 1, a worker on hosts 2 and 3) and the metadata store (PostgreSQL on
    host 1), each node on its host's address and disk (operations/host_cluster.py). `status` (from another
    process) sees every node on its host, 3 brokers, 2 live DataNodes and 2 workers, as a client on host 1
    sees them; every host has its own settings; a file written to HDFS from host 1 has its 2 replicas on
    the DataNodes' hosts. (Host 2 dies in the next test, under the whole Lambda path.)"""
    c, hosts, state = on_hosts, on_hosts.hosts, on_hosts.state
    assert hosts is not None
    where = {name: info["host"] for name, info in state["processes"].items()}
    assert where == {"kafka-1": 1, "kafka-2": 2, "kafka-3": 3, "namenode": 1, "datanode-1": 2, "datanode-2": 3,
                     "spark-master": 1, "spark-worker-1": 2, "spark-worker-2": 3, "metadata": 1}, where
    assert all(p["alive"] for p in state["processes"].values())
    assert (state["kafka"]["brokers_serving"], state["hdfs"]["live_datanodes"], state["spark"]["alive_workers"]) \
        == (3, 2, 2), state
    assert state["spark"]["master_url"] == "spark://198.18.0.11:7077"
    # every host got its own settings (mode 0600: they hold the metadata store's password)
    for h in (1, 2, 3):
        own = hosts.host_dir(h) / "radstack" / "radstack.yaml"
        assert own.stat().st_mode & 0o077 == 0 and "postgresql+psycopg://postgres:" in own.read_text()
    assert c.run(3, [PY, "-c", "from radstack.config import load_settings; s = load_settings(); "
                                "print(s.home, s.metadata.url.split('@')[1])"]).split() == \
        [str(hosts.host_dir(3) / "radstack"), "198.18.0.11:5432/radstack"]  # fmt: skip

    write = ("import sys\nfrom hdfs import InsecureClient\n"
             "c = InsecureClient(sys.argv[1], user='root')\n"
             "c.write('/probe/blob', data=b'x' * 100000, overwrite=True, replication=2)\n"
             "print(c.status('/probe/blob')['replication'])\n")  # fmt: skip
    assert hosts.run(1, [PY, "-c", write, state["hdfs"]["webhdfs_url"]]).stdout.strip() == "2"
    for h in (2, 3):  # the block lives on the DataNodes' hosts, on their disks
        blocks = list((hosts.host_dir(h) / "cluster" / "hdfs" / "data").rglob("blk_*"))
        assert any(b.stat().st_size == 100000 for b in blocks), h
    assert not list((hosts.host_dir(1) / "cluster").rglob("blk_*"))  # no DataNode on host 1



def _wait_back(c: OnHosts, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while (back := c.status())["kafka"]["brokers_serving"] != 3 or back["spark"]["alive_workers"] != 2 \
            or back["hdfs"]["live_datanodes"] != 2:
        assert time.monotonic() < deadline, back
        time.sleep(1)
    assert all(p["alive"] for p in back["processes"].values()), back["processes"]


def _until(what: str, timeout: float, probe: Callable[[], Any], done: Callable[[Any], bool]) -> Any:
    deadline, seen = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        seen = probe()
        if done(seen):
            return seen
        time.sleep(2)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last seen {seen}")


def _supervisor(topic: str, bootstrap: str) -> dict[str, Any]:
    """A Druid Kafka supervisor spec (the shape of Druid's tutorial) with radstack's eventId extension."""
    return {"type": "kafka", "processing": {"eventId": "id"}, "spec": {
        "ioConfig": {"type": "kafka", "topic": topic, "consumerProperties": {"bootstrap.servers": bootstrap},
                     "inputFormat": {"type": "json"}, "useEarliestOffset": True, "lateMessageRejectionPeriod": "PT6H"},
        "tuningConfig": {"type": "kafka"},
        "dataSchema": {"dataSource": topic, "timestampSpec": {"column": "timestamp", "format": "millis"},
                       "dimensionsSpec": {"dimensions": ["page"]},
                       "metricsSpec": [{"type": "count", "name": "count"},
                                       {"type": "longSum", "name": "bytes", "fieldName": "bytes"}],
                       "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "minute",
                                           "rollup": True}}}}  # fmt: skip


def test_the_whole_path_on_three_hosts_survives_host_2_dying(on_hosts: OnHosts) -> None:
    """#36 item 3. On host 1: `radctl serve`, the receiver, the archiver and the streaming driver
    (spark-submit to the standalone master; its executors on hosts 2 and 3, its checkpoint in HDFS, the
    segments' metadata in PostgreSQL). A supervisor is posted through Druid's API. Events for a closed hour
    go in through the receiver and reach the real-time answer; then the rebuild of that hour runs on the
    cluster while events for the next hour go in, and host 2 dies under both — every process SIGKILLed, the
    namespace torn down — and comes back. Then the driver is killed on host 1 and started on host 3: it
    resumes from the shared checkpoint. Counts, all exact: every accepted event archived once, the
    real-time answer equal to what was accepted, the rebuild equal to the generator's truth."""
    from operations.spark_standalone import spark_home

    c, hosts = on_hosts, on_hosts.hosts
    assert hosts is not None
    began = time.monotonic()
    _wait_back(c)
    topic = "clicks"
    bootstrap = c.state["kafka"]["bootstrap_servers"]
    env = {"RADSTACK_RECEIVER__TOPICS": f"[{topic}]", "RADSTACK_ARCHIVER__MAX_AGE_SECONDS": "2",
           "RADSTACK_SPARK__SHUFFLE_PARTITIONS": "2", "RADSTACK_STREAMING__HANDOFF": "false",
           # overshadowed segments stay listed (not marked unused at once) so sys.segments shows them
           "RADSTACK_COORDINATOR__OVERSHADOWED_UNUSED_DELAY_SECONDS": "3600",
           "SPARK_SUBMIT": str(spark_home() / "bin" / "spark-submit")}  # fmt: skip
    submit = str(REPO / "deploy" / "spark" / "submit-radctl.py")
    create = ("import sys\nfrom confluent_kafka.admin import AdminClient, NewTopic\n"
              "a = AdminClient({'bootstrap.servers': sys.argv[1]})\n"
              "a.create_topics([NewTopic(sys.argv[2], 2, 3, config={'min.insync.replicas': '2'})])[sys.argv[2]].result(30)\n")  # fmt: skip
    c.run(1, [PY, "-c", create, bootstrap, topic])
    c.spawn(1, [PY, "-m", "operations", "serve"], "serve", **env)
    c.spawn(1, [PY, "-m", "operations", "receiver"], "receiver", **env)
    c.spawn(1, [PY, "-m", "operations", "archiver"], "archiver", **env)
    health = "import httpx, sys; print(httpx.get(sys.argv[1], timeout=5).status_code)"
    for url in ("http://127.0.0.1:8888/status/health", "http://127.0.0.1:8200/status/health"):
        _until(url, 90, lambda u=url: subprocess.run(c._exec(1, [PY, "-c", health, u]), env=c.env, capture_output=True,
                                                      text=True, check=False).stdout.strip(), lambda s: s == "200")  # fmt: skip
    post_sup = ("import json, sys, httpx\n"
                "r = httpx.post('http://127.0.0.1:8888/druid/indexer/v1/supervisor', content=sys.argv[1], "
                "headers={'content-type': 'application/json'}, timeout=60)\nprint(r.status_code, r.text)\n")  # fmt: skip
    assert c.run(1, [PY, "-c", post_sup, json.dumps(_supervisor(topic, bootstrap))]).startswith("200")
    driver = c.spawn(1, [PY, submit, "--", "stream", "--timeout", "1500"], "stream-host1", **env)

    now = int(time.time() * 1000)
    closed, current = now // HOUR * HOUR - 2 * HOUR, now // HOUR * HOUR - HOUR  # two closed hours
    events = f"http://127.0.0.1:8200/v1/events/{topic}"

    def post(first: int, n: int, ts0: int, pause: float) -> dict[str, Any]:
        return dict(orjson.loads(c.run(1, [PY, "-c", POST, events, str(first), str(n), str(ts0), str(pause)],
                                       timeout=900).strip().splitlines()[-1]))  # fmt: skip

    def total(start: int) -> int:
        hour = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(start / 1000))
        rows = c.sql(f"SELECT SUM(\"count\") AS n FROM {topic} WHERE __time >= TIMESTAMP '{hour}' "
                     f"AND __time < TIMESTAMP '{hour}' + INTERVAL '1' HOUR")  # fmt: skip
        return int(rows[0]["n"] or 0) if isinstance(rows, list) and rows else 0

    def archived() -> dict[str, int]:
        return dict(orjson.loads(c.run(1, [PY, "-c", ARCHIVED, topic]).strip().splitlines()[-1]))

    # phase 1: the closed hour, through the receiver, into the real-time answer and the archive
    n1 = 3000
    a1 = post(0, n1, closed + 60_000, 0.02)
    assert a1["accepted"] == n1, a1
    _until("the real-time answer of the first hour", 300, lambda: total(closed), lambda t: t == n1)
    _until("the archive of the first hour", 120, archived, lambda a: a["records"] >= n1)

    # phase 2: the rebuild of that hour on the cluster while the next hour's events go in; host 2 dies
    # as soon as a task of the rebuild runs there (its executor's log in the worker's work dir on host 2)
    work2 = hosts.host_dir(2) / "cluster" / "spark" / "work"
    apps_before = {p.name for p in work2.iterdir()}
    n2 = 4000
    # the poster sends its first half, then holds its second half until host 2 is dead: whatever the
    # rebuild takes to reach host 2, the receiver is at work when the host dies and rides it out
    hold = hosts.host_dir(1) / "poster-hold"
    hold.touch()
    poster = subprocess.Popen(c._exec(1, [PY, "-c", POST, events, str(n1), str(n2), str(current + 60_000), "1", str(hold)]),
                              env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    rebuild = c.spawn(1, [PY, str(REPO / "deploy" / "spark" / "submit-rebuild.py"), "-d", topic,
                          "-i", f"{time.strftime('%Y-%m-%dT%H', time.gmtime(closed / 1000))}/PT1H", "--force"],
                      "rebuild", **env)  # --force: the hour is closed, but inside the 6 h window period

    def rebuild_task_on_host_2() -> bool:
        return any("Running task" in err.read_text(errors="replace")
                   for app in work2.iterdir() if app.name not in apps_before for err in app.glob("*/stderr"))

    deadline = time.monotonic() + 300
    while not rebuild_task_on_host_2():
        assert rebuild.poll() is None and time.monotonic() < deadline, (c.logs / "rebuild.log").read_text()[-3000:]
        time.sleep(0.2)
    killed = hosts.kill_host(2)
    assert rebuild.poll() is None and poster.poll() is None  # both were at work when the host died
    hold.unlink()  # the second half goes in while host 2 is down
    gone = c.status()
    assert [n for n, p in gone["processes"].items() if not p["alive"]] == ["kafka-2", "datanode-1", "spark-worker-1"]
    assert gone["hosts"]["running"] == {"1": True, "2": False, "3": True}
    for node in ("kafka-2", "datanode-1", "spark-worker-1"):  # the host comes back, with its disk
        started = c.radctl("start", node)
        assert started.returncode == 0, started.stdout + started.stderr
    out, err = poster.communicate(timeout=600)
    a2 = orjson.loads(out.strip().splitlines()[-1]) if out.strip() else {"error": err[-2000:]}
    assert a2.get("accepted") == n2, a2
    assert rebuild.wait(timeout=900) == 0, (c.logs / "rebuild.log").read_text()[-4000:]
    _wait_back(c)
    _until("the real-time answer of the second hour", 300, lambda: total(current), lambda t: t == n2)

    # phase 3: the driver dies on host 1 and starts on host 3, from the checkpoint in HDFS
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait(timeout=30)
    n3 = 1000
    a3 = post(n1 + n2, n3, current + 60_000 + n2 * 200, 0.02)
    assert a3["accepted"] == n3, a3
    c.spawn(3, [PY, submit, "--", "stream", "--timeout", "900"], "stream-host3", **env)
    _until("the real-time answer after the driver moved to host 3", 300, lambda: total(current),
           lambda t: t >= n2 + n3)
    moved = (c.logs / "stream-host3.log").read_text()
    assert f"supervisor {topic}: streaming {topic} (generation 1, checkpoint hdfs://" in moved  # host 1's driver's
    time.sleep(5)  # a replayed micro-batch would show up now
    realtime_current = total(current)
    arch = _until("the archive of every accepted event", 180, archived, lambda a: a["records"] >= n1 + n2 + n3)
    rebuilt = total(closed)
    segments = c.sql(f"SELECT COUNT(*) AS n FROM sys.segments WHERE datasource = '{topic}' AND is_overshadowed = 1")
    produced, accepted = n1 + n2 + n3, a1["accepted"] + a2["accepted"] + a3["accepted"]
    REPORT["whole path on 3 hosts, host 2 killed under the rebuild and the receiver, the driver moved to host 3"] = (
        f"produced {produced}; accepted {accepted}; archived {arch['records']} ({arch['distinct']} distinct); "
        f"real-time total {n1} + {realtime_current}; rebuilt total {rebuilt}; lost {accepted - arch['distinct']}; "
        f"duplicated {arch['records'] - arch['distinct']}; processes killed {len(killed)}; resent batches "
        f"{a2['resent']} ({a2['statuses']}); seconds {time.monotonic() - began:.0f}")
    assert arch == {"records": accepted, "distinct": accepted}  # every accepted event archived exactly once
    assert realtime_current == n2 + n3  # the moved driver resumed: nothing lost, nothing counted twice
    assert rebuilt == n1  # the rebuild of the closed hour equals the generator's truth
    assert segments[0]["n"] >= 1  # its real-time segments are overshadowed by the rebuilt version
