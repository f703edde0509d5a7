"""Archiver throughput vs a confluent-kafka consumer that reads the fields an archive must keep, in one run.

    .venv/bin/python benchmarks/bench_archiver.py [--events 1000000] [--partitions 4] [--rounds 3]
        [--fetch-queue-backoff-ms MS]

Starts an embedded Apache Kafka broker in a temp dir, produces N ~200-byte JSON events, then consumes
them ``--rounds`` times each, alternating, with fresh consumer groups: (1) the baseline of
``vs_consumer_reading_fields`` — a consumer that reads every message's value, key, partition, offset and
timestamp (what an archive must keep) and drops them; (2) bare — consume, read the value, drop (the
baseline before 2026-11-27, kept for history); (3) the archiver writing Parquet files to local deep
storage (flush every ``--max-records`` per partition, default 250k: with fewer events than partitions
× that, every flush happens at the end), then (4) the same without the parsed archive's columns
(``archiver.parsed_columns`` false). Each prints its CPU time per event (this process, every thread).
Both consumers use the archiver's fetch settings (``realtime.archiver.archiver.FETCH_SETTINGS``;
``--fetch-queue-backoff-ms 1000`` gives both librdkafka's default, the setting before 2026-11-26).
Prints events/s for each round, the ratios and their medians (JSON on the last line), plus the archive
size in Parquet vs gzip'd JSON lines of the same values (the format choice).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.dataset as pads
from confluent_kafka import Consumer, Producer

from operations.heap import frozen_startup_heap
from operations.kafka_broker import KafkaBroker
from operations.processes import free_port
from radstack.storage.deep_storage.local import LocalDeepStorage
from radstack.time.intervals import format_instant
from realtime.archiver import Archiver, ArchiverConfig
from realtime.archiver.archiver import FETCH_SETTINGS
from realtime.topics import ensure_topics


def produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                  "compression.type": "lz4", "queue.buffering.max.messages": 1_000_000})
    now = int(time.time() * 1000)
    for i in range(n):
        v = json.dumps({"timestamp": format_instant(now - (i % 7200) * 1000), "impression_id": f"imp-{i:012d}",
                        "publisher": f"pub{i % 97}", "advertiser": f"adv{i % 13}", "city": "Berlin",
                        "gender": "f" if i % 2 else "m", "price": (i % 1000) / 100}).encode()
        while True:
            try:
                p.produce(topic, value=v)
                break
            except BufferError:
                p.poll(0.05)
        if i % 10_000 == 0:
            p.poll(0)
    p.flush(120)


def _read_fields(msgs: list[Any]) -> int:
    """The baseline's per-message work: every field an archive keeps, read and dropped."""
    got = 0
    for m in msgs:
        if m.error() is None:
            got += 1
            m.value(), m.key(), m.partition(), m.offset(), m.timestamp()
    return got


def _read_value(msgs: list[Any]) -> int:
    got = 0
    for m in msgs:
        if m.error() is None:
            got += 1
            m.value()
    return got


def bare_consume(bootstrap: str, topic: str, n: int, fetch: dict[str, Any], read: Any = _read_value) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bare-{time.time_ns()}", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "isolation.level": "read_committed", **fetch})
    c.subscribe([topic])
    got = 0
    t0 = None
    while got < n:
        msgs = c.consume(10_000, 1.0)
        if msgs and t0 is None:
            t0 = time.perf_counter()
        got += read(msgs)
    dt = time.perf_counter() - (t0 or time.perf_counter())
    c.close()
    return n / dt


def archive(bootstrap: str, topic: str, n: int, root: Path, max_records: int, fetch: dict[str, Any],
            parsed: bool = True) -> float:
    cfg = ArchiverConfig(bootstrap, [topic], group_id=f"arch-{time.time_ns()}", max_records=max_records,
                         max_age_seconds=30, consumer_conf=fetch, parsed_columns=parsed)
    a = Archiver(cfg, LocalDeepStorage(root))
    first: list[float] = []

    def started(_: object) -> None:  # timed from the first record, as the bare consumer is
        if not first and a.buffers:
            first.append(time.perf_counter())

    stats = a.run(idle_exit_seconds=3, on_progress=started)
    dt = time.perf_counter() - first[0] - 3  # the idle wait at the end is not work
    assert stats.records == n, (stats.records, n)
    return n / dt


def _cpu_s() -> float:
    """CPU seconds (user + system) of this process, every thread: the consumers and the archiver run in it
    (the whole of a run: its group join and, for the archiver, its idle wait at the end, both small)."""
    t = os.times()
    return t.user + t.system


def peak_rss_mb() -> int:
    """Peak resident memory of this process (the consumers and the archiver run in it)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--max-records", type=int, default=250_000,
                    help="archiver.max_records: flush a partition's buffer at this many records")
    ap.add_argument("--rounds", type=int, default=3, help="bare and archiver runs, alternating")
    ap.add_argument("--fetch-queue-backoff-ms", type=int, default=None,
                    help="fetch.queue.backoff.ms for both consumers (default: the archiver's own setting)")
    args = ap.parse_args()
    fetch = dict(FETCH_SETTINGS)
    if args.fetch_queue_backoff_ms is not None:
        fetch["fetch.queue.backoff.ms"] = args.fetch_queue_backoff_ms
    with tempfile.TemporaryDirectory() as tmp:
        broker = KafkaBroker(home=Path(tmp) / "kafka", port=free_port(), controller_port=free_port(), heap="1g")
        broker.start(timeout=120)
        try:
            topic = "bench-raw"
            ensure_topics(broker.bootstrap_servers, {topic: args.partitions})
            t0 = time.perf_counter()
            produce(broker.bootstrap_servers, topic, args.events)
            print(f"produced {args.events:,} events in {time.perf_counter() - t0:.1f}s; fetch settings {fetch}")
            ratios: dict[str, list[float]] = {"vs_consumer_reading_fields": [], "vs_bare_consumer": []}
            # µs of CPU per event; "archiver_raw_only": archiver.parsed_columns false (the raw columns, as before #54)
            cpu: dict[str, list[float]] = {"consumer_reading_fields": [], "archiver": [], "archiver_raw_only": []}
            raw_only: list[float] = []
            for r in range(args.rounds):
                # all with the start-up heap frozen, as `radctl archiver` runs (operations.heap)
                c0 = _cpu_s()
                with frozen_startup_heap():
                    fields = bare_consume(broker.bootstrap_servers, topic, args.events, fetch, _read_fields)
                cpu["consumer_reading_fields"].append((_cpu_s() - c0) / args.events * 1e6)
                with frozen_startup_heap():
                    bare = bare_consume(broker.bootstrap_servers, topic, args.events, fetch)
                root = Path(tmp) / f"deep-{r}"
                c0 = _cpu_s()
                with frozen_startup_heap():
                    arch = archive(broker.bootstrap_servers, topic, args.events, root, args.max_records, fetch)
                cpu["archiver"].append((_cpu_s() - c0) / args.events * 1e6)
                c0 = _cpu_s()
                with frozen_startup_heap():
                    raw_only.append(archive(broker.bootstrap_servers, topic, args.events, Path(tmp) / f"deep-raw-{r}",
                                            args.max_records, fetch, parsed=False))  # fmt: skip
                cpu["archiver_raw_only"].append((_cpu_s() - c0) / args.events * 1e6)
                ratios["vs_consumer_reading_fields"].append(arch / fields)
                ratios["vs_bare_consumer"].append(arch / bare)
                print(f"round {r + 1}: consumer reading fields {fields:10,.0f} events/s   bare consumer {bare:10,.0f} "
                      f"events/s   archiver {arch:10,.0f} events/s   archiver/fields = {arch / fields:.2f}   "
                      f"archiver/bare = {arch / bare:.2f}   CPU per event: consumer reading fields "
                      f"{cpu['consumer_reading_fields'][-1]:.2f} µs, archiver {cpu['archiver'][-1]:.2f} µs; the archiver "
                      f"without the parsed columns {raw_only[-1]:,.0f} events/s, {cpu['archiver_raw_only'][-1]:.2f} µs",
                      flush=True)  # fmt: skip
            files = list(root.rglob("*.parquet"))
            pq_bytes = sum(f.stat().st_size for f in files)
            values = pads.dataset([str(f) for f in files]).to_table(columns=["value"]).column("value").to_pylist()
            gz_bytes = len(gzip.compress(b"\n".join(values), 6))
            medians = {k: round(statistics.median(v), 2) for k, v in ratios.items()}
            print(f"median archiver / consumer reading fields = {medians['vs_consumer_reading_fields']}, archiver / "
                  f"bare consumer = {medians['vs_bare_consumer']} over {args.rounds} rounds (baselines: confluent-kafka "
                  f"consumers with the same fetch settings; max_records {args.max_records:,})")
            print(f"archive size  : parquet(zstd, with Kafka coordinates) {pq_bytes / 1e6:.1f} MB, "
                  f"json-lines.gz (values only) {gz_bytes / 1e6:.1f} MB, files {len(files)}")
            print(json.dumps({"events": args.events, "partitions": args.partitions, "max_records": args.max_records,
                              "baseline": "a confluent-kafka consumer reading value, key, partition, offset "
                                          "and timestamp of every message", **medians,
                              "rounds": {k: [round(x, 3) for x in v] for k, v in ratios.items()},
                              "cpu_us_per_event": {k: round(statistics.median(v), 2) for k, v in cpu.items()},
                              "raw_only_events_per_s": round(statistics.median(raw_only)),
                              "parquet_mb": round(pq_bytes / 1e6, 1), "peak_rss_mb": peak_rss_mb()}))
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
