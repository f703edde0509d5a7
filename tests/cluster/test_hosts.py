"""Simulated hosts (#36 item 1, the ground the cluster will stand on): three Linux network + mount
namespaces on a private bridge in 198.18.0.0/24 (operations/hosts.py).

* a host reaches another host's address, and its own loopback is its own;
* no host has a route out of the bridge, and the machine itself has no route to the hosts (checked
  with ``ip route get``: nothing is sent);
* a host's /tmp and home are its own; the project tree is there, read-only;
* killing a host SIGKILLs every process in it at once and removes its namespace; it comes back with
  the same address and disk, an empty /tmp;
* ``down`` leaves no namespace, link or process behind, also when the test body fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from operations.hosts import REPO, SimulatedHosts, leftover_namespaces, processes_in_netns

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


#: run on host 1: an idempotent producer of N numbered events, acks=all; prints how many were delivered
PRODUCE = """
import sys, time
from confluent_kafka import Producer
bootstrap, topic, first, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
              "message.timeout.ms": 120000, "linger.ms": 5})
ok = []
for i in range(first, first + n):
    p.produce(topic, str(i).encode(), on_delivery=lambda e, m: ok.append(m) if e is None else None)
    p.poll(0)
    time.sleep(0.001)
p.flush(150)
print(len(ok))
"""
#: run on host 1: every value of the topic, read from the beginning
CONSUME = """
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "count", "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "isolation.level": "read_committed"})
c.subscribe([sys.argv[2]])
values, idle = [], time.monotonic()
while time.monotonic() - idle < 8:
    for m in c.consume(1000, timeout=1.0):
        if m.error() is None:
            values.append(int(m.value()))
            idle = time.monotonic()
print(len(values), len(set(values)))
"""


def test_the_cluster_on_three_hosts_survives_host_2_dying(tmp_path: Path) -> None:
    """`radctl cluster up --hosts 3`: Kafka ×3, HDFS (NameNode on host 1, a DataNode on hosts 2 and 3)
    and Spark standalone (master on host 1, a worker on hosts 2 and 3), each node on its host's address
    and disk (operations/host_cluster.py). `status` (from another process) sees every node on its host,
    3 brokers, 2 live DataNodes and 2 workers, as a client on host 1 sees them; a file written to HDFS
    from host 1 has its 2 replicas on the DataNodes' hosts. Then a client on host 1 produces 6,000
    events (acks=all, idempotent) while host 2 dies — every process SIGKILLed, its namespace torn down —
    and `radctl cluster start` brings its nodes back (the host first, with its disk): every accepted
    event is read back exactly once. `down` leaves no namespace behind."""
    import orjson

    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")} | {"RADSTACK_HOME": str(home)}

    def radctl(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([PY, "-m", "operations", "cluster", *args], env=env, capture_output=True, text=True,
                              timeout=timeout, check=False)  # fmt: skip

    def status() -> dict:  # type: ignore[type-arg]
        return dict(orjson.loads(radctl("status", "--json").stdout))

    hosts: SimulatedHosts | None = None
    try:
        up = radctl("up", "--hosts", "3", timeout=600)
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        state = status()
        hosts = SimulatedHosts.from_state(state["hosts"])
        where = {name: info["host"] for name, info in state["processes"].items()}
        assert where == {"kafka-1": 1, "kafka-2": 2, "kafka-3": 3, "namenode": 1, "datanode-1": 2, "datanode-2": 3,
                         "spark-master": 1, "spark-worker-1": 2, "spark-worker-2": 3}, where
        assert all(p["alive"] for p in state["processes"].values())
        assert (state["kafka"]["brokers_serving"], state["hdfs"]["live_datanodes"], state["spark"]["alive_workers"]) \
            == (3, 2, 2), state
        assert state["spark"]["master_url"] == "spark://198.18.0.11:7077"

        write = ("import sys\nfrom hdfs import InsecureClient\n"
                 "c = InsecureClient(sys.argv[1], user='root')\n"
                 "c.write('/probe/blob', data=b'x' * 100000, overwrite=True, replication=2)\n"
                 "print(c.status('/probe/blob')['replication'])\n")  # fmt: skip
        assert hosts.run(1, [PY, "-c", write, state["hdfs"]["webhdfs_url"]]).stdout.strip() == "2"
        for h in (2, 3):  # the block lives on the DataNodes' hosts, on their disks
            blocks = list((hosts.host_dir(h) / "cluster" / "hdfs" / "data").rglob("blk_*"))
            assert any(b.stat().st_size == 100000 for b in blocks), h
        assert not list((hosts.host_dir(1) / "cluster").rglob("blk_*"))  # no DataNode on host 1

        bootstrap = state["kafka"]["bootstrap_servers"]
        create = ("import sys\nfrom confluent_kafka.admin import AdminClient, NewTopic\n"
                  "a = AdminClient({'bootstrap.servers': sys.argv[1]})\n"
                  "a.create_topics([NewTopic('events', 3, 3)])['events'].result(30)\n")  # fmt: skip
        hosts.run(1, [PY, "-c", create, bootstrap])
        producer = hosts.spawn(1, [PY, "-c", PRODUCE, bootstrap, "events", "0", "6000"], tmp_path / "produce.log")
        time.sleep(3)
        killed = hosts.kill_host(2)  # the machine dies mid-produce: its broker, DataNode and worker
        gone = status()
        assert [n for n, p in gone["processes"].items() if not p["alive"]] == ["kafka-2", "datanode-1", "spark-worker-1"]
        assert gone["hosts"]["running"] == {"1": True, "2": False, "3": True}
        time.sleep(3)
        for node in ("kafka-2", "datanode-1", "spark-worker-1"):  # the first brings host 2 back
            started = radctl("start", node)
            assert started.returncode == 0, started.stdout + started.stderr
        assert producer.wait(timeout=240) == 0, (tmp_path / "produce.log").read_text()[-2000:]
        delivered = int((tmp_path / "produce.log").read_text().split()[-1])
        deadline = time.monotonic() + 120
        while (back := status())["kafka"]["brokers_serving"] != 3 or back["spark"]["alive_workers"] != 2:
            assert time.monotonic() < deadline, back
            time.sleep(1)
        assert all(p["alive"] for p in back["processes"].values())
        consumed = hosts.run(1, [PY, "-c", CONSUME, bootstrap, "events"], timeout=120).stdout.split()
        total, distinct = int(consumed[0]), int(consumed[1])
        print(f"\ncluster on 3 hosts: up {state['timings_s']}; host 2 killed ({len(killed)} processes) mid-produce: "
              f"produced 6000, accepted {delivered}, read back {total} ({distinct} distinct)")
        assert delivered == 6000  # two in-sync replicas stayed: nothing was refused
        assert total == distinct == delivered  # every accepted event exactly once
        assert len(killed) >= 4  # the broker, the DataNode, the worker and the host's holder
    finally:
        down = radctl("down")
        if hosts is not None:
            hosts.down()  # whatever `down` could not reach
    assert down.returncode == 0 and "stopped" in down.stdout, down.stdout + down.stderr
    assert hosts is not None and leftover_namespaces(hosts.tag) == []
