"""The multi-node path on real processes (``make test-cluster``; also part of ``make test``): 3 Kafka KRaft
nodes, HDFS with 2 DataNodes (replication 2), a Spark standalone master with 2 workers, all started by
:class:`operations.cluster.LocalCluster` (what ``radctl cluster up`` runs).

* ``radctl cluster status --json`` sees every node; topics get replication 3 and ``min.insync.replicas=2``;
* a Kafka broker killed with SIGKILL in the middle of produce → stream (``spark-submit`` to ``spark://``)
  → archive (HDFS): 0 events lost, 0 duplicated in the archive, the streaming job's answer reaches every
  event, and the rebuild submitted with ``spark-submit --master spark://`` (deploy/spark's wrapper)
  publishes segments that overshadow the real-time ones and answer exactly the produced truth;
* a DataNode killed with SIGKILL while the archiver writes: every archived event is still readable;
* Airflow's DAG submits the rebuild with its SparkSubmitOperator, then the compaction job is submitted;
* ``radctl cluster up|status|down`` and ``stop|start|restart NODE`` from separate processes, every port
  freed at the end.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pyarrow.parquet as pq
import pytest

from operations.cluster import LocalCluster
from radstack.config import Settings, load_settings
from tests.cluster.conftest import REPORT

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

REPO = Path(__file__).resolve().parents[2]
HOUR = 3_600_000
SPEC = """\
dataSchema:
  dataSource: {name}
  timestampSpec: {{column: ts, format: millis}}
  dimensionsSpec: {{dimensions: [page]}}
  metricsSpec: [{{type: count, name: count}}, {{type: longSum, name: bytes, fieldName: bytes}}]
  granularitySpec: {{segmentGranularity: hour, queryGranularity: minute}}
processing: {{topics: [{topic}], eventId: id, windowPeriod: PT2H}}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    home = tmp_path_factory.mktemp("cluster-home")
    c = LocalCluster(home=home)
    try:
        c.up()
        yield c
    finally:
        c.down()


def _env(cluster: LocalCluster) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
    env.update({"RADSTACK_HOME": str(cluster.home), "RADSTACK_CONFIG": str(cluster.settings_file),
                "RADSTACK_SPARK__SHUFFLE_PARTITIONS": "2", "RADSTACK_STREAMING__HANDOFF": "false"})  # fmt: skip
    return env


def _submit_env(cluster: LocalCluster) -> dict[str, str]:
    """``_env`` plus the installed PySpark's ``spark-submit`` for deploy/spark's wrappers."""
    from operations.spark_standalone import spark_home

    return _env(cluster) | {"SPARK_SUBMIT": str(spark_home() / "bin" / "spark-submit")}


def _settings(cluster: LocalCluster) -> Settings:
    return load_settings(cluster.settings_file, env={"RADSTACK_HOME": str(cluster.home)})


def _topic(cluster: LocalCluster, name: str) -> str:
    from realtime.topics import ensure_topics

    ensure_topics(cluster.bootstrap_servers, {name: 2}, replication_factor=3, config={"min.insync.replicas": "2"})
    _wait(lambda: len(_partitions(cluster, name)) == 2, 30, f"topic {name} in the metadata")
    return name


def _partitions(cluster: LocalCluster, topic: str) -> dict[int, Any]:
    from realtime.topics import admin_client

    md = admin_client(cluster.bootstrap_servers).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    return dict(t.partitions) if t is not None and t.error is None else {}


def _wait(pred: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def _produce(cluster: LocalCluster, topic: str, n: int, batches: int, on_batch: Callable[[int], None],
             t0: int) -> dict[str, int]:  # fmt: skip
    """``n`` unique events in ``batches`` batches through radstack's producer (acks=all, idempotent);
    ``on_batch(i)`` runs before batch i. Returns page → events (the truth)."""
    from realtime.producer import BatchProducer

    producer = BatchProducer(cluster.bootstrap_servers, delivery_timeout_ms=120_000)
    truth: dict[str, int] = {}
    per = n // batches
    try:
        for b in range(batches):
            on_batch(b)
            values = []
            for i in range(b * per, (b + 1) * per):
                page = f"/p{i % 7}"
                truth[page] = truth.get(page, 0) + 1
                values.append(orjson.dumps({"id": f"e{i}", "ts": t0 + i, "page": page, "bytes": i % 100}))
            res = producer.deliver(topic, values)
            assert res.failed == 0 and res.delivered == per, res
            time.sleep(0.2)
    finally:
        producer.close()
    return truth


def _archiver(cluster: LocalCluster, topic: str) -> tuple[threading.Thread, dict[str, Any]]:
    """The archiver on the cluster's brokers and HDFS, in a thread, until 30 s without a record (a
    broker's failover stalls the producer for a few seconds)."""
    from radstack.storage.deep_storage import open_deep_storage
    from radstack.storage.metadata import MetadataStore
    from realtime.archiver import Archiver, ArchiverConfig

    settings = _settings(cluster)
    out: dict[str, Any] = {}

    def run() -> None:
        md = MetadataStore.from_settings(settings)
        cfg = ArchiverConfig(bootstrap_servers=cluster.bootstrap_servers, topics=[topic], group_id=f"arch-{topic}",
                             max_age_seconds=0.5, timestamp_fields={topic: ("ts", "millis")}, session_timeout_ms=6000)
        try:
            out["stats"] = Archiver(cfg, open_deep_storage(settings), md).run(idle_exit_seconds=30)
        except BaseException as e:  # reported by the test
            out["error"] = e
        finally:
            md.close()

    th = threading.Thread(target=run, name=f"archiver-{topic}", daemon=True)
    th.start()
    return th, out


def _archive_ids(cluster: LocalCluster, topic: str) -> list[str]:
    """Every event id in the archive (all files, read back through HDFS)."""
    import io

    from radstack.storage.deep_storage import open_deep_storage
    from radstack.storage.raw_archive import topic_prefix

    storage = open_deep_storage(_settings(cluster))
    ids: list[str] = []
    for key in storage.list(topic_prefix(topic)):
        if key.endswith(".parquet"):
            for v in pq.ParquetFile(io.BytesIO(storage.get_bytes(key))).read(columns=["value"]).column("value").to_pylist():
                ids.append(orjson.loads(v)["id"])
    return ids


def _sql(url: str, query: str) -> list[dict[str, Any]]:
    r = httpx.post(f"{url}/druid/v2/sql", json={"query": query}, timeout=60)
    if r.status_code == 400 and "not found" in r.text:
        return []
    assert r.status_code == 200, r.text
    return list(r.json())


def _by_page(url: str, ds: str) -> dict[str, int]:
    return {r["page"]: int(r["n"]) for r in _sql(url, f'SELECT page, SUM("count") AS n FROM {ds} GROUP BY page')}


def _partition_leader(cluster: LocalCluster, topic: str, partition: int) -> int:
    return int(_partitions(cluster, topic)[partition].leader)


def test_status_sees_every_node_and_topics_replicate(cluster: LocalCluster) -> None:
    from confluent_kafka.admin import ConfigResource

    from realtime.topics import admin_client

    proc = subprocess.run([sys.executable, "-m", "operations", "cluster", "status", "--json"], env=_env(cluster),
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    state = orjson.loads(proc.stdout)
    names = {"kafka-1", "kafka-2", "kafka-3", "namenode", "datanode-1", "datanode-2", "spark-master",
             "spark-worker-1", "spark-worker-2"}  # fmt: skip
    assert set(state["processes"]) == names and all(p["alive"] for p in state["processes"].values())
    assert state["kafka"]["brokers_serving"] == 3
    assert state["hdfs"]["live_datanodes"] == 2
    assert (state["spark"]["master_status"], state["spark"]["alive_workers"]) == ("ALIVE", 2)
    settings = _settings(cluster)
    assert settings.spark.master == cluster.spark.master_url  # type: ignore[union-attr]
    assert settings.deep_storage.type == "hdfs" and not settings.kafka.embedded

    topic = _topic(cluster, f"rf-{uuid.uuid4().hex[:8]}")
    assert [len(p.replicas) for p in _partitions(cluster, topic).values()] == [3, 3]
    admin = admin_client(cluster.bootstrap_servers)
    configs = next(iter(admin.describe_configs([ConfigResource("topic", topic)]).values())).result(timeout=10)
    assert configs["min.insync.replicas"].value == "2"


def test_broker_kill_during_produce_stream_archive(cluster: LocalCluster) -> None:
    from tests.fixtures.server import running_server

    name = f"web{uuid.uuid4().hex[:6]}"
    topic = _topic(cluster, f"{name}-raw")
    (cluster.home / "datasources").mkdir(exist_ok=True)
    (cluster.home / "datasources" / f"{name}.yaml").write_text(SPEC.format(name=name, topic=topic))
    n, batches = 30_000, 30
    t0 = int(time.time() * 1000) // HOUR * HOUR - HOUR + 60_000  # the previous hour: inside windowPeriod
    logs = cluster.home / "logs"
    logs.mkdir(exist_ok=True)
    stream_log = (logs / f"stream-{name}.out").open("wb")
    # the streaming job as a Spark application: spark-submit --master spark://… (deploy/spark's wrapper)
    stream = subprocess.Popen([sys.executable, str(REPO / "deploy" / "spark" / "submit-radctl.py"), "--", "stream",
                               "-d", name, "--timeout", "600"], env=_submit_env(cluster), stdout=stream_log,
                              stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    archiver, arch_out = _archiver(cluster, topic)
    killed: list[int] = []

    def kill_midway(b: int) -> None:
        if b == batches // 3:
            node = _partition_leader(cluster, topic, 0)  # the leader of the partition being written
            cluster.kill_broker(node)
            killed.append(node)

    try:
        truth = _produce(cluster, topic, n, batches, kill_midway, t0)
        assert killed and sum(truth.values()) == n
        cluster.restart_broker(killed[0])  # the node rejoins (catches up as a follower)
        archiver.join(timeout=300)
        assert not archiver.is_alive() and "error" not in arch_out, arch_out
        ids = _archive_ids(cluster, topic)
        assert len(ids) == n, f"archive holds {len(ids)} events, {n} were produced"
        assert len(set(ids)) == n, f"{len(ids) - len(set(ids))} duplicated in the archive"

        # overshadowed segments stay listed (not marked unused at once) so sys.segments shows them
        keep = {"coordinator": {"overshadowed_unused_delay_seconds": 3600}}
        with running_server(cluster.home, cluster.settings() | keep) as srv:
            # the streaming job (executors on the Spark workers) recovers and reaches every event
            _wait(lambda: _by_page(srv.url, name) == truth, 300, "the real-time answer to reach every event")
            os.killpg(stream.pid, signal.SIGTERM)  # spark-submit and its Python driver
            assert stream.wait(timeout=120) is not None
            apps = cluster.spark.state()  # type: ignore[union-attr]
            assert any(a["name"] == f"radstack-stream-{name}" for a in apps["completedapps"] + apps["activeapps"])
            realtime_ids = {r["segment_id"] for r in _sql(srv.url, f"SELECT segment_id FROM sys.segments WHERE datasource = '{name}'")}
            assert realtime_ids
            # the checkpoint lives in HDFS, where every host reaches it (#36 item 2), not on the driver's disk
            from radstack.storage.deep_storage import open_deep_storage

            hdfs = open_deep_storage(_settings(cluster))
            assert hdfs.exists(f"checkpoints/{name}/metadata") and hdfs.list(f"checkpoints/{name}/offsets/")
            assert not (cluster.home / "checkpoints").exists()

            # the rebuild of that hour on spark:// through deploy/spark's spark-submit wrapper
            env = _submit_env(cluster)
            interval = f"{time.strftime('%Y-%m-%dT%H', time.gmtime(t0 // 1000))}/PT1H"
            t = time.monotonic()
            proc = subprocess.run([sys.executable, str(REPO / "deploy" / "spark" / "submit-rebuild.py"), "--config",
                                   str(cluster.settings_file), "-d", name, "-i", interval, "--force"],
                                  env=env, capture_output=True, text=True, timeout=900, check=False)  # fmt: skip
            assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
            print(f"rebuild on spark:// took {time.monotonic() - t:.1f}s")
            apps = cluster.spark.state()  # type: ignore[union-attr]
            done = [a for a in apps["completedapps"] if a["name"] == f"radstack-rebuild-{name}"]
            assert done and done[-1]["state"] == "FINISHED", apps["completedapps"]

            _wait(lambda: _sql(srv.url, f"SELECT COUNT(*) AS c FROM sys.segments WHERE datasource = '{name}' "
                                        "AND is_overshadowed = 1")[0]["c"] >= len(realtime_ids), 60,
                  "the real-time segments to be overshadowed")  # fmt: skip
            rows = _sql(srv.url, f"SELECT segment_id, is_overshadowed FROM sys.segments WHERE datasource = '{name}'")
            assert all(r["is_overshadowed"] == 1 for r in rows if r["segment_id"] in realtime_ids)
            assert _by_page(srv.url, name) == truth
            total = _sql(srv.url, f'SELECT SUM("count") AS n, SUM(bytes) AS b FROM {name}')[0]
            assert (total["n"], total["b"]) == (n, sum(i % 100 for i in range(n)))
            REPORT["local cluster, a broker killed mid-produce"] = (
                f"produced {n}; archived {len(ids)} ({len(set(ids))} distinct); real-time answer = truth; "
                f"rebuilt total {total['n']}; lost {n - len(set(ids))}; duplicated {len(ids) - len(set(ids))}")
    finally:
        if stream.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(stream.pid, signal.SIGKILL)
            stream.wait(timeout=30)
        stream_log.close()
        for node in killed:
            b = cluster.brokers[node - 1]
            if b.process is None:
                cluster.restart_broker(node)


def test_datanode_kill_during_archive(cluster: LocalCluster) -> None:
    topic = _topic(cluster, f"dn-{uuid.uuid4().hex[:8]}")
    n, batches = 20_000, 40
    archiver, arch_out = _archiver(cluster, topic)

    def kill_midway(b: int) -> None:
        if b == batches // 3:
            cluster.hdfs.kill("datanode-2")  # type: ignore[union-attr]

    t0 = int(time.time() * 1000) // HOUR * HOUR
    _produce(cluster, topic, n, batches, kill_midway, t0)
    archiver.join(timeout=300)
    assert not archiver.is_alive() and "error" not in arch_out, arch_out
    ids = _archive_ids(cluster, topic)
    assert len(ids) == n, f"archive holds {len(ids)} events, {n} were produced"
    assert len(set(ids)) == n, f"{len(ids) - len(set(ids))} duplicated in the archive"
    assert arch_out["stats"].records == n
    REPORT["local cluster, a DataNode killed mid-archive"] = (
        f"produced {n}; archived {len(ids)} ({len(set(ids))} distinct); lost {n - len(set(ids))}; "
        f"duplicated {len(ids) - len(set(ids))}")


def test_airflow_dag_submits_the_rebuild_to_spark_standalone(cluster: LocalCluster, tmp_path: Path) -> None:
    """The DAG of a datasource, run by Airflow 3 (``dag.test()`` in its own venv) with
    ``spark.master: spark://…``: its rebuild task is a SparkSubmitOperator whose application runs on the
    standalone cluster, reading the archive in HDFS and publishing there."""
    from batch.backfill import visible
    from radstack.storage.deep_storage import open_deep_storage
    from radstack.storage.metadata import MetadataStore
    from radstack.time.intervals import Interval, format_instant, parse_instant
    from tests.fixtures.airflow import airflow_environment, run_dag_test
    from tests.fixtures.batch import set_watermark, write_archive

    name = f"af{uuid.uuid4().hex[:6]}"
    (cluster.home / "datasources").mkdir(exist_ok=True)
    (cluster.home / "datasources" / f"{name}.yaml").write_text(SPEC.format(name=name, topic=name))
    settings = _settings(cluster)
    t0 = parse_instant("2026-11-20T00:00:00Z")  # long closed
    events = [{"id": f"e{i}", "ts": t0 + i * 9_000, "page": f"/p{i % 5}", "bytes": i} for i in range(300)]
    write_archive(open_deep_storage(settings), name, [orjson.dumps(e) for e in events + events[:40]], timestamp_field="ts")
    with MetadataStore.from_settings(settings) as md:
        set_watermark(md, name, t0 + 4 * HOUR)  # past the hour's end + windowPeriod (PT2H)
    spark = cluster.spark
    assert spark is not None
    port = spark.master_url.rsplit(":", 1)[1]
    env = airflow_environment(
        cluster.home, tmp_path / "airflow", RADSTACK_CONFIG=str(cluster.settings_file),
        # the Spark provider's connection: host spark://127.0.0.1, the master's port
        AIRFLOW_CONN_SPARK_DEFAULT=orjson.dumps({"conn_type": "spark", "host": "spark://127.0.0.1", "port": int(port)}).decode(),
    )  # fmt: skip
    from operations.spark_standalone import spark_home

    env["PATH"] = f"{spark_home() / 'bin'}:{env['PATH']}"  # spark-submit, as on a Spark client host
    interval = Interval(t0, t0 + HOUR)
    res = run_dag_test(env, f"radstack_rebuild_{name}", {"interval": interval.iso()})
    assert res["state"] == "success", res
    assert res["tasks"] == {"wait_for_archive": "success", "rebuild": "success", "druid": "success",
                            "verify": "success"}, res
    log = (tmp_path / "airflow" / "dag-test.log").read_text()
    assert f"--master {spark.master_url}" in log  # the SparkSubmitHook's command line
    apps = spark.state()
    done = [a for a in apps["completedapps"] if a["name"] == f"radstack-rebuild-{name}"]
    assert done and done[-1]["state"] == "FINISHED", apps["completedapps"]
    with MetadataStore.from_settings(settings) as md:
        segs = [s for s, _ in visible(md, name, interval)]
        assert segs
        groups = {((t0 + i * 9_000) // 60_000, i % 5) for i in range(300) if t0 + i * 9_000 < t0 + HOUR}
        assert sum(s.num_rows for s in segs) == len(groups), format_instant(t0)

    # -- the compaction job on the same cluster: the hour's minute rows rolled up to one row per page -----
    # (an HOUR bucket: a bucket must end by the latest data's end, here the rebuilt hour's)
    cfg = tmp_path / "compaction.json"
    cfg.write_text(orjson.dumps({
        "dataSource": name, "skipOffsetFromLatest": "PT0S",
        "metricsSpec": [{"type": "count", "name": "count"}, {"type": "longSum", "name": "bytes", "fieldName": "bytes"}],
        "tiers": [{"olderThan": "P1D", "queryGranularity": "HOUR", "segmentGranularity": "HOUR"}],
    }).decode())  # fmt: skip
    proc = subprocess.run([sys.executable, str(REPO / "deploy" / "spark" / "submit-radctl.py"), "--", "compact",
                           "-d", name, "--runner", "spark", "--config-file", str(cfg)], env=_submit_env(cluster),
                          capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    apps = spark.state()
    assert any(a["name"] == "radstack-compaction" and a["state"] == "FINISHED" for a in apps["completedapps"]), proc.stdout
    with MetadataStore.from_settings(settings) as md:
        compacted = [s for s, _ in visible(md, name, interval)]
    assert compacted and {s.version for s in compacted}.isdisjoint({s.version for s in segs})  # a newer version
    assert {s.interval for s in compacted} == {interval}
    assert sum(s.num_rows for s in compacted) == 5  # 5 pages × 1 hour: every key rolled up in one shard


def test_cli_up_status_down_frees_every_port(tmp_path: Path) -> None:
    """``radctl cluster up`` leaves the nodes running after it exits; ``status`` and ``down`` work from
    other processes (they read ``state.json``); after ``down`` every port is free again. A small
    cluster (1 node of each kind) beside the module's big one."""
    from operations.processes import port_in_use

    env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")} | {"RADSTACK_HOME": str(tmp_path)}

    def radctl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "operations", "cluster", *args], env=env, capture_output=True,
                              text=True, timeout=300, check=False)  # fmt: skip

    up = radctl("up", "--kafka-nodes", "1", "--datanodes", "1", "--workers", "1")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert "cluster up" in up.stdout and "radstack.yaml" in up.stdout
        st = radctl("status", "--json")
        assert st.returncode == 0, st.stderr
        state = orjson.loads(st.stdout)
        assert len(state["processes"]) == 5 and all(p["alive"] for p in state["processes"].values())
        assert (state["kafka"]["brokers_serving"], state["hdfs"]["live_datanodes"], state["spark"]["alive_workers"]) == (1, 1, 1)
        ports = [int(a.rsplit(":", 1)[1]) for a in state["kafka"]["bootstrap_servers"].split(",")]
        ports += [int(state["spark"]["master_url"].rsplit(":", 1)[1]), int(state["hdfs"]["fs_url"].rsplit(":", 1)[1])]
        assert all(port_in_use("127.0.0.1", p) for p in ports)
        again = radctl("up")
        assert again.returncode == 1 and "already running" in again.stdout

        # one node at a time, from other processes (#36 item 5)
        stopped = radctl("stop", "datanode")
        assert stopped.returncode == 0 and "stopped datanode" in stopped.stdout, stopped.stdout + stopped.stderr
        state = orjson.loads(radctl("status", "--json").stdout)
        assert not state["processes"]["datanode"]["alive"] and state["processes"]["namenode"]["alive"]
        assert radctl("stop", "datanode").stdout.strip() == "datanode was not running"
        started = radctl("start", "datanode")
        assert started.returncode == 0 and "started datanode" in started.stdout, started.stdout + started.stderr
        deadline = time.monotonic() + 60
        while (state := orjson.loads(radctl("status", "--json").stdout))["hdfs"]["live_datanodes"] != 1:
            assert time.monotonic() < deadline, state["hdfs"]
            time.sleep(1)
        assert state["processes"]["datanode"]["alive"]
        restarted = radctl("restart", "kafka-1")
        assert restarted.returncode == 0 and "restarted kafka-1" in restarted.stdout, restarted.stdout + restarted.stderr
        state = orjson.loads(radctl("status", "--json").stdout)
        assert all(p["alive"] for p in state["processes"].values()) and state["kafka"]["brokers_serving"] == 1
        unknown = radctl("start", "kafka-9")
        assert unknown.returncode == 1 and "no node 'kafka-9'" in unknown.stdout
        assert radctl("start", "namenode").returncode == 1  # running already
    finally:
        down = radctl("down")
    assert down.returncode == 0 and "stopped 5 processes" in down.stdout, down.stdout + down.stderr
    assert not any(port_in_use("127.0.0.1", p) for p in ports)
    gone = radctl("status")
    assert gone.returncode == 1 and "no cluster" in gone.stdout
