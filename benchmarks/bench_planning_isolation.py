"""Planning off the server's interpreter: a dashboard's latency while other clients send 128 KiB statements.

    .venv/bin/python benchmarks/bench_planning_isolation.py [--rows 1000000] [--home /tmp/radstack-planning]
                                                           [--clients 10] [--requests 200]

On a home that ``broker_bench.py`` generates (``--rows`` rows, once), the real server (uvicorn, its own
process) is started twice in one run: with ``server.planning_processes: 0`` (the baseline: every
statement planned in the server process) and with ``1`` (statements of 16 KiB or more planned by a worker
process). Each time a dashboard client sends ``--requests`` sequential one-day queries (SQL ``COUNT(*)``,
SQL timeseries by hour, native topN), first alone (idle), then while ``--clients`` other clients each send
128 KiB SQL statements (an ``IN`` list of ~9,000 values) back to back. Prints the dashboard's p50/p99
both ways, the ratio under load / idle, and how many big statements were answered meanwhile.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import broker_bench as bb  # noqa: E402 - the dataset and the dashboard mix are broker_bench's

DAY = "2025-01-15/2025-01-16"
WHERE = "__time >= TIMESTAMP '2025-01-15 00:00:00' AND __time < TIMESTAMP '2025-01-16 00:00:00'"


def dashboard() -> list[tuple[str, str, Any]]:
    mix = bb.dashboard_queries(DAY)
    return [
        ("SQL COUNT(*)", "/druid/v2/sql", {"query": f"SELECT COUNT(*) AS n FROM {bb.DS} WHERE {WHERE}"}),
        ("SQL timeseries by hour", *mix["SQL timeseries by hour"]),
        ("native topN 10 on d100k", *mix["native topN 10 on d100k"]),
    ]


def big_statement(chars: int = 128 * 1024 - 256) -> str:
    head = f"SELECT COUNT(*) AS n FROM {bb.DS} WHERE d100k IN ("
    values, size, i = [], len(head) + 1, 0
    while size < chars:
        v = f"'d100k_{i}'"
        values.append(v)
        size += len(v) + 2
        i += 1
    return head + ", ".join(values) + ")"


def dashboard_latencies(url: str, requests: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {name: [] for name, _, _ in dashboard()}
    with httpx.Client(base_url=url, timeout=600) as c:
        for _name, path, body in dashboard():  # warm-up
            c.post(path, json=body).raise_for_status()
        for _ in range(requests):
            for name, path, body in dashboard():
                t0 = time.perf_counter()
                c.post(path, json=body).raise_for_status()
                out[name].append((time.perf_counter() - t0) * 1000)
    return out


def loaded(url: str, requests: int, clients: int) -> tuple[dict[str, list[float]], int, list[float]]:
    """The dashboard's latencies while ``clients`` send big statements; (latencies, big answered, their s)."""
    stop = threading.Event()
    done: list[float] = []
    sql = big_statement()

    def hammer(client: int) -> None:
        with httpx.Client(base_url=url, timeout=600) as c:
            k = 0
            while not stop.is_set():
                k += 1  # a new text each time: the translation memo must not answer it
                t0 = time.perf_counter()
                r = c.post("/druid/v2/sql", json={"query": sql.replace("AS n", f"AS n_{client}_{k}", 1)})
                if r.status_code == 200:
                    done.append(time.perf_counter() - t0)

    threads = [threading.Thread(target=hammer, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    time.sleep(2.0)  # every big client has a statement in flight
    try:
        lat = dashboard_latencies(url, requests)
    finally:
        stop.set()
        for t in threads:
            t.join(600)
    return lat, len(done), done


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--home", default="/tmp/radstack-planning")
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--requests", type=int, default=200)
    args = ap.parse_args()
    home = Path(args.home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    from radstack.config import load_settings

    bb.load(load_settings(env={"RADSTACK_HOME": str(home)}), args.rows)
    print(f"# planning isolation: {args.rows:,} rows, {args.clients} clients sending {len(big_statement()):,}-char "
          f"statements, {args.requests} dashboard rounds, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    print("\n| planning | query | idle p50 / p99 ms | under load p50 / p99 ms | p99 under load / idle | "
          "big statements answered (median s) |")
    print("|---|---|---:|---:|---:|---:|")
    for processes, label in ((0, "in the server process (baseline)"), (1, "1 worker process")):
        proc, url = bb.start_server(home, {"RADSTACK_SERVER__PLANNING_PROCESSES": str(processes)},
                                    "bench-planning.log")
        try:
            idle = dashboard_latencies(url, args.requests)
            busy, n_big, big_s = loaded(url, args.requests, args.clients)
        finally:
            bb.stop_server(proc)
        for name in idle:
            i, b = idle[name], busy[name]
            print(f"| {label} | {name} | {pct(i, 0.5):.1f} / {pct(i, 0.99):.1f} | {pct(b, 0.5):.1f} / "
                  f"{pct(b, 0.99):.1f} | {pct(b, 0.99) / pct(i, 0.99):.2f}× | "
                  f"{n_big} ({statistics.median(big_s) if big_s else float('nan'):.2f} s) |")


if __name__ == "__main__":
    main()
