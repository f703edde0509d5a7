"""Tiny dashboard queries over HTTP: a one-day ``COUNT(*)`` against the floor of the HTTP stack and against
DuckDB answering the same rows from one in-memory table.

    .venv/bin/python benchmarks/bench_tiny_queries.py [--rows 1000000] [--requests 2000] [--home /tmp/radstack-tiny]

On a home that ``broker_bench.py`` generates (``--rows`` rows over 30 days, once), the real server
(uvicorn in its own process, as ``radctl serve`` runs it) answers ``--requests`` sequential requests per
query from one keep-alive connection (the standard library's ``http.client``, the lightest Python client;
``httpx``, which the other benchmarks use, adds about 0.4 ms a request on this machine): the SQL one-day
``COUNT(*)`` (from the ``hourly`` projection, and on base rows with ``noProjections``), the native
timeseries of the same count, and ``GET /status/health`` (the HTTP stack's floor: routing, middleware,
one metadata-store ping). The first 10 % of each run are a warm-up and not counted.

Baseline, in the same run: DuckDB in this process holding the same rows in one in-memory table, the same
count over the same day (median of the same number of runs). Prints p50/p99 per query, the ratio to the
baseline and the server's peak RSS; the last line is JSON.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import broker_bench as bb  # noqa: E402 - the dataset and the server are broker_bench's

DAY = ("2025-01-15 00:00:00", "2025-01-16 00:00:00")
WHERE = f"__time >= TIMESTAMP '{DAY[0]}' AND __time < TIMESTAMP '{DAY[1]}'"
COUNT_SQL = f"SELECT COUNT(*) AS n FROM {bb.DS} WHERE {WHERE}"


def requests_mix() -> list[tuple[str, str, str, Any]]:
    """(name, method, path, JSON body) of each measured request."""
    native = {"queryType": "timeseries", "dataSource": bb.DS, "granularity": "all",
              "intervals": ["2025-01-15T00:00:00Z/2025-01-16T00:00:00Z"],
              "aggregations": [{"type": "count", "name": "n"}]}
    return [
        ("GET /status/health (floor)", "GET", "/status/health", None),
        ("SQL COUNT(*) one day", "POST", "/druid/v2/sql", {"query": COUNT_SQL}),
        ("SQL COUNT(*) one day, noProjections", "POST", "/druid/v2/sql",
         {"query": COUNT_SQL, "context": {"noProjections": True}}),
        ("native timeseries count one day", "POST", "/druid/v2", native),
    ]


def http_latencies(url: str, method: str, path: str, body: Any, n: int) -> tuple[list[float], bytes]:
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port))
    payload = None if body is None else json.dumps(body)
    headers = {} if body is None else {"Content-Type": "application/json"}
    times, answer = [], b""
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            conn.request(method, path, payload, headers)
            resp = conn.getresponse()
            answer = resp.read()
            times.append((time.perf_counter() - t0) * 1000)
            if resp.status != 200:
                raise SystemExit(f"{method} {path}: HTTP {resp.status}: {answer[:300]!r}")
    finally:
        conn.close()
    return times[n // 10:], answer


def flat_table_latency(rows: int, n: int) -> tuple[list[float], int]:
    """The same day's COUNT(*) from one in-memory DuckDB table of the same rows (this process)."""
    table = bb.generate(rows)
    con = duckdb.connect()
    con.register("rows_in", table)
    con.execute(f"CREATE TABLE {bb.DS} AS SELECT epoch_ms(ts) AS __time, * EXCLUDE (ts) FROM rows_in")
    con.unregister("rows_in")
    times, count = [], 0
    for _ in range(n):
        t0 = time.perf_counter()
        (count,) = con.execute(COUNT_SQL).fetchone()  # type: ignore[misc]
        times.append((time.perf_counter() - t0) * 1000)
    con.close()
    return times[n // 10:], int(count)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--home", default="/tmp/radstack-tiny")
    args = ap.parse_args()
    home = Path(args.home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    from radstack.config import load_settings

    bb.load(load_settings(env={"RADSTACK_HOME": str(home)}), args.rows)
    base, truth = flat_table_latency(args.rows, args.requests)
    base_p50 = statistics.median(base)
    print(f"# tiny queries: {args.rows:,} rows, {args.requests} sequential requests each (http.client, keep-alive), "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    print(f"# baseline: DuckDB, one in-memory table in this process: one-day COUNT(*) = {truth:,}, "
          f"p50 {base_p50:.3f} ms")
    print("\n| request | p50 ms | p99 ms | p50 / baseline |")
    print("|---|---:|---:|---:|")
    out: dict[str, Any] = {"rows": args.rows, "baseline_p50_ms": round(base_p50, 3), "requests": {}}
    proc, url = bb.start_server(home, None, "bench-tiny.log")
    try:
        for name, method, path, body in requests_mix():
            times, answer = http_latencies(url, method, path, body, args.requests)
            if body is not None and str(truth) not in answer.decode():
                raise SystemExit(f"{name}: expected {truth} in {answer[:300]!r}")
            p50, p99 = statistics.median(times), sorted(times)[int(len(times) * 0.99)]
            out["requests"][name] = {"p50_ms": round(p50, 3), "p99_ms": round(p99, 3)}
            print(f"| {name} | {p50:.2f} | {p99:.2f} | {p50 / base_p50:.1f}× |")
        out["server_peak_rss_mb"] = round(bb.memory(proc.pid)[1] / 2**20, 1)
    finally:
        bb.stop_server(proc)
    print(f"\nserver peak RSS {out['server_peak_rss_mb']} MB")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
