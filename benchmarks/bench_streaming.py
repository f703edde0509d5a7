"""Real-time layer speed: sustained throughput Kafka → published real-time segment, and freshness
(produce → counted by a Druid SQL query) at a fixed rate, with a raw confluent-kafka consumer as the
yardstick in the same run.

    .venv/bin/python benchmarks/bench_streaming.py [--events 1500000] [--rate 5000] [--seconds 60]

Starts an embedded Apache Kafka broker in a temp dir (or uses ``--bootstrap``), then:

1. throughput: produces N ``ads`` impressions, runs the streaming job (availableNow,
   ``--max-offsets`` per micro-batch) over them; events/s from job start and warm (after the first
   micro-batch, which pays for the JVM/Python worker start-up); then a bare confluent-kafka consumer
   reads the same N messages (events/s, and the ratio);
2. freshness: the job runs with a ``--trigger`` processing-time trigger (default
   ``streaming.trigger_seconds``); after ``--warmup`` seconds of the same traffic (a long-running job
   has a warm JIT, worker pool and state store), a producer sends ``ads`` impressions at ``--rate``
   events/s for ``--seconds``; a poller runs
   ``SELECT SUM("count")`` through the query broker every 100 ms; the freshness of event i is the
   time the answer first reached i+1 minus the time i was produced. Prints p50/p95/max.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import Consumer, Producer

from radstack.config import Settings

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "ads" / "ads.yaml"


def _spec(topic: str, name: str) -> Any:
    from radstack.spec import load_datasource_spec

    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["dataSchema"]["dataSource"] = name
    raw["processing"]["topics"] = [topic]
    return load_datasource_spec(raw)


def _producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1_000_000,
                     "compression.type": "lz4", "queue.buffering.max.messages": 2_000_000})


def _events(n: int, start_ms: int, sim_rate: float, seed: int) -> Any:
    from realtime.generators import ads
    from realtime.generators.common import GeneratorOptions

    opts = GeneratorOptions(events=n, seed=seed, start_ms=start_ms, sim_rate=sim_rate, duplicates=0.0, late=0.0)
    return (e for e in ads.generate(opts, start_ms) if e.stream == "impressions")


def _produce(p: Producer, topic: str, e: Any) -> None:
    """Produce one event, waiting for room in the producer's queue."""
    while True:
        try:
            p.produce(topic, value=e.value, key=e.key)
            return
        except BufferError:
            p.poll(0.01)


def produce_all(bootstrap: str, topic: str, n: int) -> float:
    p = _producer(bootstrap)
    t0 = time.perf_counter()
    for e in _events(n, int(time.time() * 1000) - 3_600_000, 1000.0, 3):
        _produce(p, topic, e)
    p.flush(300)
    return time.perf_counter() - t0


def bare_consume(bootstrap: str, topic: str, n: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bare-{time.time_ns()}", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    c.subscribe([topic])
    got, t0 = 0, None
    while got < n:
        msgs = c.consume(10_000, 1.0)
        if msgs and t0 is None:
            t0 = time.perf_counter()
        got += sum(1 for m in msgs if m.error() is None)
    dt = time.perf_counter() - (t0 or time.perf_counter())
    c.close()
    return got / dt if dt > 0 else float("nan")


def throughput(settings: Settings, spark: Any, bootstrap: str, n: int, max_offsets: int) -> dict[str, float]:
    from realtime.streaming.job import StreamingJob, stream_options
    from realtime.topics import ensure_topics

    topic = f"bench-tp-{time.time_ns()}"
    ensure_topics(bootstrap, {topic: 2})
    produce_s = produce_all(bootstrap, topic, n)
    spec = _spec(topic, "bench_tp")
    batches: list[tuple[float, int]] = []
    opts = stream_options(settings, bootstrap_servers=bootstrap, available_now=True,
                          max_offsets_per_trigger=max_offsets, handoff=False)
    job = StreamingJob(settings, spec, opts, spark=spark)
    job.sink.on_batch = lambda st: batches.append((time.perf_counter(), int(st["lastBatch"]["processed"])))
    t0 = time.perf_counter()
    job.run(timeout=1800)
    for prog in job.query.recentProgress if job.query is not None else []:
        print_profile(prog)
    total = sum(b[1] for b in batches)
    assert total == n, (total, n)
    end = batches[-1][0]
    warm_rows = total - batches[0][1]
    warm = warm_rows / (end - batches[0][0]) if len(batches) > 1 else float("nan")
    raw = bare_consume(bootstrap, topic, n)
    return {"events": n, "produce_s": produce_s, "batches": len(batches), "total_s": end - t0,
            "events_per_s": n / (end - t0), "warm_events_per_s": warm, "raw_consumer_events_per_s": raw,
            "ratio_warm_to_raw": warm / raw}


def print_profile(prog: Any) -> None:
    """One line per micro-batch: Spark's own phase timings and the dedup state operator's."""
    d = prog.get("durationMs", {}) if isinstance(prog, dict) else prog.durationMs
    ops = prog.get("stateOperators", []) if isinstance(prog, dict) else prog.stateOperators
    st = ops[0] if ops else {}
    get = (lambda k: st.get(k, 0)) if isinstance(st, dict) else (lambda k: getattr(st, k, 0))
    print(f"  batch {prog['batchId'] if isinstance(prog, dict) else prog.batchId}: rows "
          f"{prog['numInputRows'] if isinstance(prog, dict) else prog.numInputRows}, "
          f"addBatch {d.get('addBatch', 0)} ms, latestOffset {d.get('latestOffset', 0)}, "
          f"queryPlanning {d.get('queryPlanning', 0)}, walCommit {d.get('walCommit', 0)}, "
          f"commitOffsets {d.get('commitOffsets', 0)}, triggerExecution {d.get('triggerExecution', 0)}; "
          f"state: rows {get('numRowsTotal')}, updates {get('allUpdatesTimeMs')} ms, "
          f"removals {get('allRemovalsTimeMs')} ms, commit {get('commitTimeMs')} ms", flush=True)


def print_stages(spark: Any) -> None:
    """Per completed stage: tasks, summed task run/CPU time, records in and shuffled (Spark's REST API)."""
    import urllib.request

    sc = spark.sparkContext
    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages?status=complete"
    for st in sorted(json.load(urllib.request.urlopen(url)), key=lambda x: x["stageId"]):
        print(f"  stage {st['stageId']:3d} tasks {st['numTasks']:2d} run {st['executorRunTime']:6d} ms "
              f"cpu {st['executorCpuTime'] // 1_000_000:6d} ms in {st['inputRecords']:8d} "
              f"shuffleRead {st['shuffleReadRecords']:8d} shuffleWrite {st['shuffleWriteRecords']:8d} "
              f"{st['name'][:60]}", flush=True)


def send_at_rate(p: Producer, topic: str, events: Any, n: int, rate: int) -> list[float]:
    """Produce ``n`` events at ``rate`` per second; returns when each one was handed to the producer."""
    produced = [0.0] * n
    t0 = time.perf_counter()
    for i, e in enumerate(events):
        if i >= n:
            break
        ahead = t0 + i / rate - time.perf_counter()
        if ahead > 0:
            time.sleep(ahead)
        _produce(p, topic, e)
        produced[i] = time.perf_counter()
        if i % 500 == 0:
            p.poll(0)
    p.flush(60)
    return produced


def freshness(settings: Settings, spark: Any, bootstrap: str, rate: int, seconds: float, trigger: float,
              warmup: float) -> dict[str, float]:
    from radstack.storage.deep_storage import open_deep_storage
    from realtime.streaming.job import StreamingJob, stream_options
    from realtime.topics import ensure_topics
    from serving.broker.service import BrokerService

    topic = f"bench-fr-{time.time_ns()}"
    ensure_topics(bootstrap, {topic: 2})
    spec = _spec(topic, "bench_fr")
    opts = stream_options(settings, bootstrap_servers=bootstrap, trigger_seconds=trigger, handoff=False)
    job = StreamingJob(settings, spec, opts, spark=spark)
    job.start()
    p = _producer(bootstrap)
    svc = BrokerService(settings, job.metadata, open_deep_storage(settings))

    def count() -> int:
        return served_count(svc, "bench_fr")

    base = warm_up(p, topic, rate, warmup, count, job.poll_progress)
    n = int(rate * seconds)
    seen, done, poller = start_poller(count, base)
    t0 = time.perf_counter()
    produced = send_at_rate(p, topic, _events(n, int(time.time() * 1000), rate, 5), n, rate)
    produce_rate = n / (time.perf_counter() - t0)
    while (seen[-1][1] if seen else 0) < n and time.perf_counter() - t0 < seconds + 120:
        job.poll_progress()
        time.sleep(0.2)
    done.set()
    poller.join()
    job.stop()
    svc.stop()
    return {"rate": rate, "trigger_s": trigger, "achieved_produce_rate": produce_rate, "events": n,
            **visibility_latency(seen, produced, n)}


def warm_up(p: Producer, topic: str, rate: int, seconds: float, count: Any, tick: Any = lambda: None) -> int:
    """Send ``seconds`` of traffic at ``rate`` (a long-running job has a warm JIT, worker pool and state
    store) and wait until ``count()`` shows all of it; returns how many events that was."""
    base = max(1, int(rate * seconds))
    send_at_rate(p, topic, _events(base, int(time.time() * 1000), rate, 99), base, rate)
    deadline = time.monotonic() + 300
    while count() < base:
        tick()
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {count()} of {base} events became visible")
        time.sleep(0.2)
    return base


def start_poller(count: Any, base: int) -> tuple[list[tuple[float, int]], threading.Event, threading.Thread]:
    """Poll ``count() - base`` every 100 ms into ``seen`` (time, events visible) until the event is set."""
    seen: list[tuple[float, int]] = []
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            seen.append((time.perf_counter(), count() - base))
            time.sleep(0.1)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    return seen, done, poller


def served_count(svc: Any, data_source: str) -> int:
    """``SUM("count")`` of a datasource through the query broker (after a refresh); 0 before any segment."""
    from serving.broker.sql.engine import execute
    from serving.errors import DruidError

    svc.refresh()
    try:
        res = execute(svc, f'SELECT SUM("count") FROM "{data_source}"')
    except DruidError:  # no segment yet
        return 0
    try:
        vals = [v for b in res.batches() for v in b.column(0).to_pylist()]
    finally:
        res.close()
    return int(vals[0] or 0) if vals else 0


def visibility_latency(seen: list[tuple[float, int]], produced: list[float], n: int) -> dict[str, float]:
    """Freshness percentiles: ``seen`` is (time, events visible) as polled, ``produced[i]`` when event i
    was produced; event i is fresh when the visible count first reaches i+1 (sampling ~5000 events)."""
    lat: list[float] = []
    j = 0
    for i in range(0, n, max(1, n // 5000)):
        while j < len(seen) and seen[j][1] < i + 1:
            j += 1
        if j == len(seen):
            break
        lat.append(seen[j][0] - produced[i])
    lat.sort()

    def pct(q: float) -> float:
        return lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")

    return {"sampled": len(lat), "p50_s": pct(0.5), "p95_s": pct(0.95), "max_s": lat[-1] if lat else float("nan")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_500_000)
    ap.add_argument("--max-offsets", type=int, default=None, help="default: streaming.max_offsets_per_trigger")
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--trigger", type=float, default=None, help="default: streaming.trigger_seconds")
    ap.add_argument("--warmup", type=float, default=20.0, help="seconds of traffic at --rate before measuring")
    ap.add_argument("--bootstrap", default=None)
    ap.add_argument("--shuffle-partitions", type=int, default=None, help="default: spark.shuffle_partitions (4)")
    ap.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting")
    ap.add_argument("--skip", choices=["throughput", "freshness"], action="append", default=[])
    ap.add_argument("--stages", action="store_true", help="print Spark's per-stage task times (turns on the UI)")
    args = ap.parse_args()
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)

    from operations.kafka_broker import KafkaBroker
    from operations.processes import free_port
    from radstack.config import load_settings
    from radstack.pipeline.spark_session import build_spark_session

    with tempfile.TemporaryDirectory(prefix="radstack-bench-stream-") as tmp:
        home = Path(tmp)
        os.environ["RADSTACK_HOME"] = str(home)
        settings = load_settings(env={"RADSTACK_HOME": str(home)})
        broker = None
        bootstrap = args.bootstrap
        if bootstrap is None:
            broker = KafkaBroker(home=home, port=free_port(), controller_port=free_port(), heap="1g")
            broker.start(timeout=180)
            bootstrap = broker.bootstrap_servers
        try:
            t = time.perf_counter()
            from realtime.streaming.job import stream_options, streaming_shuffle_partitions

            parts = args.shuffle_partitions or streaming_shuffle_partitions(settings)
            extra = dict(kv.split("=", 1) for kv in args.spark_conf)
            if args.stages:
                extra.update({"spark.ui.enabled": "true", "spark.ui.port": str(free_port())})
            spark = build_spark_session(settings, app_name="bench-streaming", shuffle_partitions=parts, extra_conf=extra)
            max_offsets = args.max_offsets or stream_options(settings, bootstrap_servers="-").max_offsets_per_trigger
            print(f"shuffle partitions {parts}, maxOffsetsPerTrigger {max_offsets}, trigger {args.trigger or 'default'}")
            print(f"spark session: {time.perf_counter() - t:.1f} s")
            if "throughput" not in args.skip:
                r = throughput(settings, spark, bootstrap, args.events, max_offsets)
                print("throughput:", {k: round(v, 2) if isinstance(v, float) else v for k, v in r.items()})
                if args.stages:
                    print_stages(spark)
            if "freshness" not in args.skip:
                trigger = args.trigger or stream_options(settings, bootstrap_servers="-").trigger_seconds
                f = freshness(settings, spark, bootstrap, args.rate, args.seconds, trigger, args.warmup)
                print("freshness:", {k: round(v, 3) if isinstance(v, float) else v for k, v in f.items()})
            spark.stop()
        finally:
            if broker is not None:
                broker.stop()


if __name__ == "__main__":
    main()
