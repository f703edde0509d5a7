"""Live query subscriptions end to end: event produced to Kafka → pushed answer that counts it, with
100 concurrent subscribers, and the serving process's CPU per subscriber.

    .venv/bin/python benchmarks/bench_subscriptions.py [--rate 5000] [--seconds 30] [--subscribers 100]

Starts an embedded Apache Kafka broker, the ``ads`` streaming job (Spark, in this process) and the
serving process (``radctl serve``, its own OS process) on one home, then runs three phases of the same
traffic (``--rate`` events/s for ``--seconds``):

1. **none**: no client — the serving process's CPU while the real-time segments grow (baseline);
2. **poll**: one dashboard polling ``SUM("count")`` every 100 ms over HTTP — the freshness it sees is
   the yardstick for the pushes;
3. **shared**: ``--subscribers`` clients on ONE windowed top-k query (shared evaluation);
4. **distinct**: ``--subscribers`` clients, each on its own windowed top-k query (``LIMIT 100+k``):
   ``--subscribers`` evaluations per change, the worst case.

Every query is ``SELECT publisher, SUM("count") … WHERE __time >= CURRENT_TIMESTAMP - INTERVAL '1' HOUR
GROUP BY 1 ORDER BY 2 DESC LIMIT n`` with ``n`` above the number of publishers, so an answer's rows add
up to every event counted: the latency of event i is the first push (to each subscriber) whose total
reaches it, minus the time i was produced. Clients are asyncio streams in a process of their own. CPU per
subscriber = (the server's CPU seconds per second in the phase − in phase 1) / subscribers.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_streaming import _events, _producer, _spec, send_at_rate  # noqa: E402

from operations.kafka_broker import KafkaBroker  # noqa: E402
from operations.processes import free_port, http_ok, radctl_argv, stop_process_group  # noqa: E402
from radstack.config import load_settings  # noqa: E402

DS = "bench_sub"
TICKS = os.sysconf("SC_CLK_TCK")


def topk(limit: int) -> str:
    return (f'SELECT publisher, SUM("count") AS events FROM "{DS}" '
            f"WHERE __time >= CURRENT_TIMESTAMP - INTERVAL '1' HOUR GROUP BY 1 ORDER BY 2 DESC LIMIT {limit}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its children so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / TICKS


async def _listen(url: str, pushes: list[tuple[float, int]], stop: asyncio.Event) -> None:
    async with httpx.AsyncClient(timeout=httpx.Timeout(30, read=None)) as c, c.stream("GET", url) as r:
        data = None
        async for line in r.aiter_lines():
            if line.startswith("data:"):
                data = line[5:].strip()
            elif line == "" and data is not None:
                rows = orjson.loads(data)
                if isinstance(rows, list):
                    pushes.append((time.perf_counter(), sum(int(x["events"] or 0) for x in rows)))
                data = None
            if stop.is_set():
                return


def client_process(server: str, queries: list[str], stop: Any, ready: Any, out: Any) -> None:
    """One SSE client per query (subscribed first), until ``stop`` is set; sends each client's pushes
    to ``out``. Runs in its own process, as dashboards do (perf_counter is CLOCK_MONOTONIC on Linux:
    the same clock as the producer's timestamps)."""
    ids = [httpx.post(f"{server}/radstack/v1/subscriptions", json={"query": q}, timeout=60).json()["id"]
           for q in queries]
    pushes: list[list[tuple[float, int]]] = [[] for _ in ids]

    async def main() -> None:
        done = asyncio.Event()
        tasks = [asyncio.create_task(_listen(f"{server}/radstack/v1/subscriptions/{i}/events", p, done))
                 for i, p in zip(ids, pushes, strict=True)]
        while not stop.is_set():
            if not ready.is_set() and all(pushes):
                ready.set()  # every stream has its first answer
            await asyncio.sleep(0.05)
        done.set()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())
    for i in ids:
        httpx.delete(f"{server}/radstack/v1/subscriptions/{i}", timeout=60)
    out.send(pushes)


def run_clients(server: str, queries: list[str], stop: threading.Event,
                ready: threading.Event) -> list[list[tuple[float, int]]]:
    ctx = multiprocessing.get_context("spawn")
    mp_stop, mp_ready = ctx.Event(), ctx.Event()
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=client_process, args=(server, queries, mp_stop, mp_ready, send), daemon=True)
    proc.start()
    while not mp_ready.wait(0.2):
        if not proc.is_alive():
            raise SystemExit("the client process died")
    ready.set()
    stop.wait()
    mp_stop.set()
    pushes = recv.recv()
    proc.join(30)
    return pushes


def poll_total(server: str, stop: threading.Event) -> list[tuple[float, int]]:
    seen: list[tuple[float, int]] = []
    with httpx.Client(timeout=30) as c:
        while not stop.is_set():
            r = c.post(f"{server}/druid/v2/sql", json={"query": f'SELECT SUM("count") AS c FROM "{DS}"'})
            if r.status_code == 200:
                seen.append((time.perf_counter(), int((r.json() or [{"c": 0}])[0]["c"] or 0)))
            time.sleep(0.1)
    return seen


def phase(name: str, server: str, server_pid: int, queries: list[str], bootstrap: str, topic: str,
          rate: int, seconds: float, base: int, seed: int) -> dict[str, Any]:
    stop, ready = threading.Event(), threading.Event()
    result: dict[str, Any] = {}
    if name == "poll":  # the yardstick: one client polling SUM("count") over HTTP every 100 ms, as dashboards do
        ready.set()
        clients = threading.Thread(target=lambda: result.update(pushes=[poll_total(server, stop)]))
    elif queries:
        clients = threading.Thread(target=lambda: result.update(pushes=run_clients(server, queries, stop, ready)))
    else:  # no client at all: the server's CPU while the real-time segments grow
        ready.set()
        clients = threading.Thread(target=stop.wait)
    clients.start()
    ready.wait()  # subscribed, connected, first answers received
    p = _producer(bootstrap)
    n = int(rate * seconds)
    cpu0, t0 = cpu_seconds(server_pid), time.perf_counter()
    produced = send_at_rate(p, topic, _events(n, int(time.time() * 1000), rate, seed), n, rate)
    deadline = time.perf_counter() + 60
    while not _all_seen(server, base + n) and time.perf_counter() < deadline:  # every event queryable
        time.sleep(0.2)
    time.sleep(2)  # the last pushes (a tick, a broker poll)
    cpu1, t1 = cpu_seconds(server_pid), time.perf_counter()
    stop.set()
    clients.join()
    out: dict[str, Any] = {"phase": name, "subscribers": len(queries), "distinct_queries": len(set(queries)),
                           "events": n, "server_cpu_s_per_s": round((cpu1 - cpu0) / (t1 - t0), 3)}
    lat: list[float] = []
    step = max(1, n // 500)
    for pushes in result.get("pushes", []):
        j = 0
        for i in range(0, n, step):
            while j < len(pushes) and pushes[j][1] < base + i + 1:
                j += 1
            if j == len(pushes):
                break
            lat.append(pushes[j][0] - produced[i])
    lat.sort()
    if lat:
        out.update(samples=len(lat), p50_s=round(lat[len(lat) // 2], 3), p95_s=round(lat[int(len(lat) * 0.95)], 3),
                   max_s=round(lat[-1], 3), pushes_per_subscriber=round(
                       sum(len(p) for p in result["pushes"]) / max(1, len(result["pushes"])), 1))
    return out


def _all_seen(server: str, total: int) -> bool:
    r = httpx.post(f"{server}/druid/v2/sql", json={"query": f'SELECT SUM("count") AS c FROM "{DS}"'}, timeout=30)
    return r.status_code == 200 and int((r.json() or [{"c": 0}])[0]["c"] or 0) >= total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--subscribers", type=int, default=100)
    ap.add_argument("--trigger", type=float, default=None, help="default: streaming.trigger_seconds")
    args = ap.parse_args()

    from radstack.pipeline.spark_session import build_spark_session
    from realtime.streaming.job import StreamingJob, stream_options, streaming_shuffle_partitions
    from realtime.topics import ensure_topics

    with tempfile.TemporaryDirectory(prefix="radstack-bench-sub-") as tmp:
        home = Path(tmp)
        os.environ["RADSTACK_HOME"] = str(home)
        broker = KafkaBroker(home=home / "kafka", port=free_port(), controller_port=free_port(), heap="1g")
        broker.start(timeout=180)
        bootstrap = broker.bootstrap_servers
        port = free_port()
        settings = load_settings(env={"RADSTACK_HOME": str(home)})
        env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
        env.update(RADSTACK_HOME=str(home), RADSTACK_SERVER__PORT=str(port), RADSTACK_KAFKA__EMBEDDED="false",
                   RADSTACK_KAFKA__BOOTSTRAP_SERVERS=bootstrap)
        log = open(home / "server.log", "wb")  # noqa: SIM115
        server_proc = subprocess.Popen(radctl_argv("serve"), env=env, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        server = f"http://127.0.0.1:{port}"
        job = None
        try:
            while not http_ok(f"{server}/status/health"):
                assert server_proc.poll() is None, (home / "server.log").read_text()
                time.sleep(0.2)
            topic = f"bench-sub-{time.time_ns()}"
            ensure_topics(bootstrap, {topic: 2})
            spark = build_spark_session(settings, app_name="bench-subscriptions",
                                        shuffle_partitions=streaming_shuffle_partitions(settings))
            trigger = args.trigger or stream_options(settings, bootstrap_servers="-").trigger_seconds
            opts = stream_options(settings, bootstrap_servers=bootstrap, trigger_seconds=trigger, handoff=False)
            job = StreamingJob(settings, _spec(topic, DS), opts, spark=spark)
            job.start()
            warm = args.rate * 10  # warm-up traffic: JIT, Python workers, state store
            send_at_rate(_producer(bootstrap), topic, _events(warm, int(time.time() * 1000), args.rate, 1), warm, args.rate)
            while not _all_seen(server, warm):
                job.poll_progress()
                time.sleep(0.5)
            total = warm
            k = args.subscribers
            plans = [("none", []), ("poll", []), ("shared", [topk(100)] * k), ("distinct", [topk(100 + i) for i in range(k)])]
            results = []
            for i, (name, queries) in enumerate(plans):
                r = phase(name, server, server_proc.pid, queries, bootstrap, topic, args.rate, args.seconds, total, 10 + i)
                total += r["events"]
                while not _all_seen(server, total):
                    job.poll_progress()
                    time.sleep(0.5)
                results.append(r)
                print(orjson.dumps(r).decode(), flush=True)
            base_cpu = results[0]["server_cpu_s_per_s"]
            for r in results[2:]:
                r["cpu_ms_per_s_per_subscriber"] = round((r["server_cpu_s_per_s"] - base_cpu) * 1000 / k, 2)
            segments = httpx.post(f"{server}/druid/v2/sql", timeout=30, json={
                "query": f"SELECT COUNT(*) AS n FROM sys.segments WHERE datasource = '{DS}'"}).json()[0]["n"]
            print(f"\nrate {args.rate} events/s, trigger {trigger}s, {k} subscribers, load average "
                  f"{os.getloadavg()[0]:.2f}, {segments} real-time segments at the end (handoff off)")
            for r in results:
                print(f"  {r['phase']:8s} server CPU {r['server_cpu_s_per_s']:.2f} s/s"
                      + (f"; one client polling every 100 ms: produced → seen p50 {r.get('p50_s')} s, "
                         f"p95 {r.get('p95_s')} s" if r["phase"] == "poll" else "")
                      + (f", per subscriber {r.get('cpu_ms_per_s_per_subscriber', 0):.2f} ms/s; produced → pushed "
                         f"p50 {r.get('p50_s')} s, p95 {r.get('p95_s')} s, max {r.get('max_s')} s "
                         f"({r.get('samples')} samples, {r.get('pushes_per_subscriber')} pushes each)" if r["subscribers"] else ""))
            print(orjson.dumps({"results": results}).decode())
        finally:
            if job is not None:
                job.stop()
            stop_process_group(server_proc.pid, 10)
            broker.stop()


if __name__ == "__main__":
    main()
