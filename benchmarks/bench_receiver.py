"""Benchmark: events/s through the HTTP receiver (``POST /v1/events/{topic}``, 1,000-event batches)
against producing the same events with a bare confluent-kafka producer, in the same run, for each
``receiver.spool`` mode asked for (``--spool always,interval,off``: the fsync policies, or no spool).

Starts a real Apache Kafka broker (embedded, temp home, free ports) unless ``--bootstrap`` is given,
and the receiver as its own process (``radctl receiver``) on a free port. Clients are threads with
keep-alive connections posting pre-serialized JSON arrays, so the client side costs little.

    .venv/bin/python benchmarks/bench_receiver.py --events 300000 --batch 1000 --clients 4 --spool always,interval,off
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from operations.kafka_broker import KafkaBroker
from operations.processes import (  # noqa: E402
    free_port,  # noqa: E402
    http_ok,
    radctl_argv,
    stop_process_group,
)
from realtime.topics import ensure_topics  # noqa: E402

START = 1_767_225_600_000


def make_events(n: int) -> list[dict]:
    pubs = ["bieberfever.com", "ultratrimfast.com", "techcrunchy.io", "recipebox.co"]
    return [
        {
            "timestamp": START + i,
            "impression_id": f"imp-{i:012d}",
            "publisher": pubs[i % 4],
            "advertiser": "google.com" if i % 3 else "amazon.com",
            "gender": "female" if i % 2 else "male",
            "city": "San Francisco",
            "price": round((i % 1000) / 997, 4),
        }
        for i in range(n)
    ]


def bench_receiver(url: str, topic: str, bodies: list[bytes], batch: int, clients: int) -> float:
    work = list(enumerate(bodies))
    lock = threading.Lock()
    errors: list[str] = []

    def client() -> None:
        with httpx.Client(timeout=60) as c:
            while True:
                with lock:
                    if not work:
                        return
                    _, body = work.pop()
                r = c.post(
                    f"{url}/v1/events/{topic}", content=body, headers={"content-type": "application/json"}
                )
                if r.status_code != 200 or r.json()["accepted"] != batch:
                    errors.append(f"{r.status_code} {r.text[:200]}")
                    return

    # warm-up (connections, topic metadata, producer id)
    with httpx.Client(timeout=60) as c:
        r = c.post(f"{url}/v1/events/{topic}", content=bodies[0])
        assert r.status_code == 200, r.text
    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit(f"receiver errors: {errors[:3]}")
    return time.perf_counter() - t0


def start_receiver(home: Path, bootstrap: str, spool: str) -> tuple[subprocess.Popen[bytes], str]:
    """``radctl receiver`` as its own process with ``receiver.spool`` set by ``spool`` (off or an fsync policy)."""
    home.mkdir(parents=True, exist_ok=True)
    rport = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
    env.update(
        RADSTACK_HOME=str(home),
        RADSTACK_KAFKA__EMBEDDED="false",
        RADSTACK_KAFKA__BOOTSTRAP_SERVERS=bootstrap,
        RADSTACK_RECEIVER__PORT=str(rport),
        RADSTACK_RECEIVER__MAX_BODY_BYTES=str(64 * 1024 * 1024),
        RADSTACK_RECEIVER__TOPICS="[bench_http]",
        RADSTACK_RECEIVER__SPOOL__ENABLED="false" if spool == "off" else "true",
        RADSTACK_RECEIVER__SPOOL__FSYNC="always" if spool == "off" else spool,
    )
    log = open(home / "receiver.log", "wb")  # noqa: SIM115
    receiver = subprocess.Popen(radctl_argv("receiver"), env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
    url = f"http://127.0.0.1:{rport}"
    deadline = time.monotonic() + 30
    while not http_ok(f"{url}/health"):
        if time.monotonic() > deadline or receiver.poll() is not None:
            raise SystemExit(f"receiver did not start; see {home / 'receiver.log'}")
        time.sleep(0.1)
    return receiver, url


def health_latencies(url: str, seconds: float) -> list[float]:
    out = []
    with httpx.Client(timeout=30) as c:
        stop = time.monotonic() + seconds
        while time.monotonic() < stop:
            t = time.perf_counter()
            c.get(f"{url}/health")
            out.append(time.perf_counter() - t)
            time.sleep(0.01)
    return out


def bench_health_under_big_bodies(url: str, topic: str, body: bytes, clients: int = 3,
                                  seconds: float = 10.0) -> dict[str, float]:
    """``/health`` p50/p99 idle (the baseline, same receiver), then while ``clients`` post ``body`` in a loop."""
    idle = sorted(health_latencies(url, 3.0))
    stop = threading.Event()
    posted = [0]

    def poster() -> None:
        with httpx.Client(timeout=120) as c:
            while not stop.is_set():
                c.post(f"{url}/v1/events/{topic}", content=body, headers={"Content-Type": "application/json"})
                posted[0] += 1

    threads = [threading.Thread(target=poster, daemon=True) for _ in range(clients)]
    for th in threads:
        th.start()
    time.sleep(1.0)
    busy = sorted(health_latencies(url, seconds))
    stop.set()
    for th in threads:
        th.join(120)

    def q(xs: list[float], f: float) -> float:
        return round(xs[min(len(xs) - 1, int(f * (len(xs) - 1)))] * 1000, 2)

    return {"idle_p50_ms": q(idle, 0.5), "idle_p99_ms": q(idle, 0.99), "busy_p50_ms": q(busy, 0.5),
            "busy_p99_ms": q(busy, 0.99), "bodies_posted": posted[0], "body_bytes": len(body)}


def bench_bare_producer(bootstrap: str, topic: str, values: list[bytes]) -> float:
    from confluent_kafka import Producer

    from realtime.producer import PRODUCER_DEFAULTS

    p = Producer({**PRODUCER_DEFAULTS, "bootstrap.servers": bootstrap})
    p.produce(topic, values[0])
    p.flush(30)
    done = {"ok": 0, "err": 0}

    def cb(err, _msg) -> None:  # type: ignore[no-untyped-def]
        done["err" if err else "ok"] += 1

    t0 = time.perf_counter()
    for v in values:
        while True:
            try:
                p.produce(topic, v, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    p.flush(120)
    dt = time.perf_counter() - t0
    if done["ok"] != len(values):
        raise SystemExit(f"bare producer delivered {done['ok']} of {len(values)}")
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=300_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--spool", default="always,interval,off",
                    help="receiver.spool modes to run, comma-separated: always / interval / never (fsync policy) or off")
    ap.add_argument("--bootstrap", help="use this Kafka instead of starting the embedded broker")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument("--health-under", type=int, default=0, metavar="BYTES",
                    help="also: /health latency while 3 clients post bodies of about this many bytes (#49)")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-receiver-"))
    broker = None
    receiver = None
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            kp, cp = free_port(), free_port()
            broker = KafkaBroker(home=tmp, port=kp, controller_port=cp, heap="512m")
            startup = broker.start()
            bootstrap = broker.bootstrap_servers
            print(f"kafka started in {startup:.1f}s on {bootstrap}", file=sys.stderr)
        ensure_topics(bootstrap, {"bench_http": args.partitions, "bench_bare": args.partitions})

        events = make_events(args.events)
        bodies = [orjson.dumps(events[i : i + args.batch]) for i in range(0, len(events), args.batch)]
        values = [orjson.dumps(e) for e in events]
        n = sum(len(events[i : i + args.batch]) for i in range(0, len(events), args.batch))

        bare_s = bench_bare_producer(bootstrap, "bench_bare", values)
        modes = [m.strip() for m in args.spool.split(",") if m.strip()]
        per_mode: dict[str, dict] = {}
        for mode in modes:  # one receiver process per spool mode, the same broker, events and clients
            receiver = start_receiver(tmp / mode, bootstrap, mode)
            http_s = bench_receiver(receiver[1], "bench_http", bodies, args.batch, args.clients)
            per_mode[mode] = {"receiver_events_per_s": round(n / http_s), "receiver_seconds": round(http_s, 3),
                              "ratio": round(bare_s / http_s, 3)}
            if args.health_under:
                per_event = len(values[0]) + 1
                big = orjson.dumps((events * (args.health_under // per_event // len(events) + 1))
                                   [: args.health_under // per_event])
                per_mode[mode]["health"] = bench_health_under_big_bodies(receiver[1], "bench_http", big)
            stop_process_group(receiver[0].pid, 10)
            receiver = None
        first = per_mode[modes[0]]
        res = {
            "events": n,
            "batch": args.batch,
            "clients": args.clients,
            "spool": modes[0],
            "receiver_events_per_s": first["receiver_events_per_s"],
            "bare_producer_events_per_s": round(n / bare_s),
            "ratio": first["ratio"],
            "receiver_seconds": first["receiver_seconds"],
            "bare_producer_seconds": round(bare_s, 3),
            "event_bytes": round(sum(map(len, values)) / len(values)),
            "modes": per_mode,
            "load_average": os.getloadavg()[0],
        }
        if args.json:
            print(orjson.dumps(res).decode())
        else:
            for mode, r in per_mode.items():
                print(f"HTTP receiver, spool {mode:>8}: {r['receiver_events_per_s']:>9,} events/s "
                      f"({n:,} events, {args.batch}-event batches, {args.clients} clients), "
                      f"ratio to the bare producer {r['ratio']:.2f}")
                h = r.get("health")
                if h:
                    print(f"  /health while 3 clients post {h['body_bytes'] / 1e6:.1f} MB bodies ({h['bodies_posted']} "
                          f"posted): p50 {h['busy_p50_ms']} ms, p99 {h['busy_p99_ms']} ms; idle p50 {h['idle_p50_ms']} ms, "
                          f"p99 {h['idle_p99_ms']} ms (baseline: the same receiver before the posts)")
            print(f"bare producer:                {res['bare_producer_events_per_s']:>9,} events/s "
                  f"(same events, acks=all, idempotent); load average {res['load_average']:.2f}")
    finally:
        if receiver is not None:
            stop_process_group(receiver[0].pid, 10)
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
