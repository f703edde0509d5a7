"""Real-time replicas: freshness and cost of ``streaming.replicas: 1`` vs ``2``, and freshness across a
SIGKILL of the replica the broker serves.

    .venv/bin/python benchmarks/bench_replicas.py [--rate 5000] [--seconds 40] [--warmup 15]

Starts an embedded Apache Kafka broker and, per scenario, real ``radctl stream --replica r`` processes
(each its own Spark driver, ``local[2]``) over one 2-partition topic. After ``--warmup`` seconds of
traffic, a producer sends ``ads`` impressions at ``--rate`` events/s for ``--seconds`` while a poller
asks the query broker ``SELECT SUM("count")`` every 100 ms; the freshness of event i is the time the
served answer first reached i+1 minus the time i was produced (as in ``bench_streaming.py``). Also
measured, over the measured window: CPU seconds per second of all streaming processes (from
``/proc``), and the Kafka records they read (the sum of their committed offsets). Scenarios:
``1`` replica, ``2`` replicas, ``2`` replicas with the served one killed halfway. ``--pin`` gives
each replica a core of its own (``taskset``), the closest this one machine gets to a node per replica.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_streaming import (  # noqa: E402
    EXAMPLE,
    _events,
    _producer,
    send_at_rate,
    served_count,
    start_poller,
    visibility_latency,
    warm_up,
)

CLK = os.sysconf("SC_CLK_TCK")


def group_cpu_seconds(pgid: int) -> float:
    """user + system CPU seconds of every live process in a process group."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid:  # field 5 (pgrp) after pid and comm
                total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / CLK


def scenario(home: Path, bootstrap: str, replicas: int, kill: bool, rate: int, seconds: float,
             warmup: float, pin: bool = False, trigger: float | None = None, master: str = "local[2]",
             shuffle_partitions: int | None = None, spark_conf: dict[str, str] | None = None,
             java_options: str = "") -> dict[str, Any]:
    from operations.processes import radctl_argv
    from radstack.config import load_settings
    from radstack.storage.deep_storage import open_deep_storage
    from radstack.storage.metadata import MetadataStore
    from radstack.storage.replicas import committed_total, state_key
    from realtime.topics import ensure_topics
    from serving.broker.service import BrokerService

    topic = f"bench-replicas-{time.time_ns()}"
    ensure_topics(bootstrap, {topic: 2})
    case = home / f"r{replicas}{'-kill' if kill else ''}"
    (case / "datasources").mkdir(parents=True)
    spec = yaml.safe_load(EXAMPLE.read_text())
    spec["processing"]["topics"] = [topic]
    (case / "datasources" / "ads.yaml").write_text(yaml.safe_dump(spec))
    (case / "radstack.yaml").write_text(yaml.safe_dump({
        "kafka": {"embedded": False, "bootstrap_servers": bootstrap},
        "spark": {"master": master, **({"conf": spark_conf} if spark_conf else {})},
        "streaming": {"handoff": False, "replicas": replicas,
                      **({"trigger_seconds": trigger} if trigger is not None else {}),
                      **({"shuffle_partitions": shuffle_partitions} if shuffle_partitions else {}),
                      **({"java_options": java_options} if java_options else {})},
    }))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
    env["RADSTACK_HOME"] = str(case)
    cpus = os.cpu_count() or 1

    def argv(r: int) -> list[str]:
        cmd = radctl_argv("stream", "--datasource", "ads", "--replica", str(r))
        return ["taskset", "-c", str(r % cpus), *cmd] if pin else cmd

    procs = {
        r: subprocess.Popen(argv(r), env=env,
                            stdout=open(case / f"stream-{r}.out", "wb"), stderr=subprocess.STDOUT,  # noqa: SIM115
                            start_new_session=True)
        for r in range(replicas)
    }
    settings = load_settings(env={"RADSTACK_HOME": str(case)})
    md = MetadataStore.from_settings(settings)
    svc = BrokerService(settings, md, open_deep_storage(settings))
    p = _producer(bootstrap)

    def count() -> int:
        return served_count(svc, "ads")

    try:
        base = warm_up(p, topic, rate, warmup, count)
        n = int(rate * seconds)
        dead_cpu: list[float] = []

        def killer() -> None:
            time.sleep(seconds / 2)
            victim = svc._replicas.get("ads", 0)
            dead_cpu.append(group_cpu_seconds(procs[victim].pid))  # /proc forgets it once killed
            with contextlib.suppress(ProcessLookupError):
                os.killpg(procs[victim].pid, signal.SIGKILL)
            print(f"  killed replica {victim} at {seconds / 2:.0f} s", flush=True)

        cpu0 = sum(group_cpu_seconds(pr.pid) for pr in procs.values())
        reads0 = sum(committed_total(md.get_state(state_key("ads", r))) for r in range(replicas))
        seen, done, poller = start_poller(count, base)
        if kill:
            threading.Thread(target=killer, daemon=True).start()
        t0 = time.perf_counter()
        produced = send_at_rate(p, topic, _events(n, int(time.time() * 1000), rate, 5), n, rate)
        while (seen[-1][1] if seen else 0) < n and time.perf_counter() - t0 < seconds + 120:
            time.sleep(0.2)
        elapsed = time.perf_counter() - t0
        cpu = sum(group_cpu_seconds(pr.pid) for pr in procs.values()) + sum(dead_cpu) - cpu0
        reads = sum(committed_total(md.get_state(state_key("ads", r))) for r in range(replicas)) - reads0
        done.set()
        poller.join()
    finally:
        for pr in procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pr.pid, signal.SIGTERM)
        for pr in procs.values():
            try:
                pr.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(pr.pid, signal.SIGKILL)
        svc.stop()
        md.close()
    return {"replicas": replicas, "kill": kill, "events": n, "served": seen[-1][1] if seen else 0,
            **visibility_latency(seen, produced, n), "cpu_s_per_s": cpu / elapsed, "kafka_records_read": reads}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--warmup", type=float, default=15.0)
    ap.add_argument("--scenario", choices=["1", "2", "2-kill"], action="append", default=None)
    ap.add_argument("--trigger", type=float, default=None, help="streaming.trigger_seconds (default: the setting's)")
    ap.add_argument("--master", default="local[2]", help="spark.master of every replica")
    ap.add_argument("--shuffle-partitions", type=int, default=None,
                    help="streaming.shuffle_partitions (default: the setting's, one per core)")
    ap.add_argument("--java-options", default="", help="streaming.java_options, e.g. -XX:TieredStopAtLevel=1")
    ap.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting for every replica (spark.conf in radstack.yaml)")
    ap.add_argument("--pin", action="store_true",
                    help="pin replica r to CPU r (taskset): each replica gets a core of its own, as on its own node")
    args = ap.parse_args()
    from operations.kafka_broker import KafkaBroker
    from operations.processes import free_port

    with tempfile.TemporaryDirectory(prefix="radstack-bench-replicas-") as tmp:
        home = Path(tmp)
        broker = KafkaBroker(home=home / "kafka", port=free_port(), controller_port=free_port(), heap="1g")
        broker.start(timeout=180)
        try:
            print(f"load average before: {os.getloadavg()[0]:.2f}")
            print("| replicas | SIGKILL of the served one | events | p50 s | p95 s | max s | CPU s/s (stream processes) "
                  "| Kafka records read |")
            print("|---|---|---|---|---|---|---|---|")
            for name in args.scenario or ["1", "2", "2-kill"]:
                r = scenario(home, broker.bootstrap_servers, int(name[0]), name.endswith("kill"), args.rate,
                             args.seconds, args.warmup, args.pin, args.trigger, args.master,
                             args.shuffle_partitions, dict(kv.split("=", 1) for kv in args.spark_conf), args.java_options)
                print(f"| {r['replicas']} | {'yes' if r['kill'] else 'no'} | {r['events']:,} (served {r['served']:,}) "
                      f"| {r['p50_s']:.2f} | {r['p95_s']:.2f} | {r['max_s']:.2f} | {r['cpu_s_per_s']:.2f} "
                      f"| {r['kafka_records_read']:,} |", flush=True)
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
