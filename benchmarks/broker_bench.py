"""Broker benchmark: scan rate vs the RADStack paper and raw DuckDB, and dashboard latency over HTTP.

    .venv/bin/python benchmarks/broker_bench.py [--rows 10000000] [--home /tmp/radstack-bench]

1. Generates ``--rows`` events (timestamp over 30 days, 5 dimensions of cardinality 10 … 100,000,
   3 metrics), indexes them through the real indexer (``radstack.storage.indexer.index_partition``, rollup off,
   DAY segments) into local deep storage and publishes them to the SQLite metadata store. With an
   existing ``--home`` that already holds the datasource this step is skipped (load once).
2. Starts a :class:`BrokerService` (segments loaded into memory) and measures ``COUNT(*)`` and
   ``SUM(m)`` over an interval holding all rows, through the datasource view, against raw DuckDB over
   the same Parquet files, in rows/second/core (the paper: Druid 53.5 M and 36.2 M rows/s/core).
3. Starts the real server (``operations.server.create_server_app`` under uvicorn, in its own process group, logs
   to ``{home}/logs/bench-server.log``) and times a dashboard mix over HTTP: timeseries by hour, topN
   10 on the 100,000-value dimension, groupBy two dimensions with a filter, and the Druid SQL
   equivalents; prints p50/p99 per query, each query run both from the datasource's aggregate
   projections (as the broker chooses) and from the base rows (context ``noProjections``), interleaved
   request by request, after checking that both give the same answer.
4. With ``--vs-repo DIR`` (another checkout, e.g. a ``git worktree`` of an older commit): a second
   server runs DIR's code over a copy of the same home (the same segment files, its own cache), and
   each query of the mix is sent to both, alternating which goes first, request by request, after
   checking both answer the same: p50 per query on each side, the ratio (this checkout / DIR) and
   its geometric mean — a before/after in one run, on one machine state.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import httpx
import numpy as np
import pyarrow as pa

from operations.processes import free_port
from radstack.config import Settings

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DS = "bench"
START_MS = 1_735_689_600_000  # 2025-01-01T00:00:00Z
DAYS = 30
CARDS = {"d10": 10, "d100": 100, "d1k": 1_000, "d10k": 10_000, "d100k": 100_000}
SCHEMA: dict[str, Any] = {
    "dataSource": DS,
    "timestampSpec": {"column": "ts", "format": "millis"},
    "dimensionsSpec": {"dimensions": list(CARDS)},
    "metricsSpec": [
        {"type": "longSum", "name": "m1", "fieldName": "m1"},
        {"type": "doubleSum", "name": "m2", "fieldName": "m2"},
        {"type": "longSum", "name": "m3", "fieldName": "m3"},
    ],
    "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none", "rollup": False},
    # aggregate projections for the dashboard mix (docs/projections.md)
    "projections": [
        {"type": "aggregate", "name": "hourly",
         "virtualColumns": [{"type": "expression", "name": "__gran", "expression": "timestamp_floor(__time, 'PT1H')",
                             "outputType": "LONG"}],
         "groupingColumns": [{"type": "long", "name": "__gran"}],
         "aggregators": [{"type": "longSum", "name": "m1", "fieldName": "m1"},
                         {"type": "doubleSum", "name": "m2", "fieldName": "m2"}]},
        {"type": "aggregate", "name": "daily_d100k", "groupingColumns": ["d100k"],
         "aggregators": [{"type": "longSum", "name": "m1", "fieldName": "m1"}]},
        {"type": "aggregate", "name": "daily_d10_d100_d1k", "groupingColumns": ["d10", "d100", "d1k"],
         "aggregators": [{"type": "longSum", "name": "m1", "fieldName": "m1"},
                         {"type": "doubleSum", "name": "m2", "fieldName": "m2"}]},
    ],
}
INTERVAL = "2025-01-01/2025-01-31"
PAPER = {"count": 53.5e6, "sum": 36.2e6}


#: above this many rows the data is generated and indexed one day at a time (100 M rows at once would
#: need ~30 GB of Python strings)
ONE_PASS_ROWS = 20_000_000


def generate(rows: int, seed: int = 7, start_ms: int = START_MS, days: int = DAYS) -> pa.Table:
    rng = np.random.default_rng(seed)
    cols: dict[str, Any] = {"ts": rng.integers(start_ms, start_ms + days * 86_400_000, rows, dtype=np.int64)}
    for name, card in CARDS.items():
        values = np.array([f"{name}_{i}" for i in range(card)], dtype=object)
        # a skewed (Zipf-like) choice, as real dimensions are
        idx = np.minimum((rng.pareto(1.2, rows) * card / 20).astype(np.int64), card - 1)
        cols[name] = pa.array(values[idx], type=pa.string())
    cols["m1"] = rng.integers(0, 1000, rows, dtype=np.int64)
    cols["m2"] = rng.random(rows) * 100.0
    cols["m3"] = rng.integers(0, 10, rows, dtype=np.int64)
    return pa.table(cols)


def load(settings: Settings, rows: int) -> None:
    from radstack.spec import parse_data_schema
    from radstack.storage.deep_storage import open_deep_storage
    from radstack.storage.indexer import index_partition
    from radstack.storage.metadata import MetadataStore
    from radstack.storage.publish import publish

    md = MetadataStore.from_url(settings.metadata_url)
    md.create_tables()
    loaded = md.segments(DS)
    if loaded:
        md.close()
        if not all(seg.projections for seg in loaded):
            raise SystemExit(f"{settings.home} holds {DS!r} built without projections: use a new --home")
        print(f"datasource {DS!r} already loaded in {settings.home}")
        return
    t0 = time.perf_counter()
    deep = open_deep_storage(settings)
    schema = parse_data_schema(SCHEMA)
    # (rows, seed, first day, days) of each pass: one pass, or one day at a time for big datasets
    passes = [(rows, 7, 0, DAYS)] if rows <= ONE_PASS_ROWS else [
        (rows // DAYS + (1 if d < rows % DAYS else 0), 7 + d, d, 1) for d in range(DAYS)]
    generating = indexing = 0.0
    segments = 0
    for n, seed, day, days in passes:
        t1 = time.perf_counter()
        table = generate(n, seed, START_MS + day * 86_400_000, days)
        t2 = time.perf_counter()
        res = index_partition(table, schema, version="2025-02-01T00:00:00.000Z", deep_storage=deep)
        publish(md, deep, res.segments)
        generating, indexing = generating + t2 - t1, indexing + time.perf_counter() - t2
        segments += len(res.segments)
        del table
    md.close()
    print(f"generated {rows:,} rows in {generating:.1f}s; indexed + published {segments} segments "
          f"in {indexing:.1f}s ({rows / indexing / 1e6:.2f} M rows/s; {time.perf_counter() - t0:.0f}s in all)")


def timed(fn: Any, repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def scan_rates(settings: Settings, cores: int, repeat: int) -> list[dict[str, Any]]:
    from radstack.storage.deep_storage import open_deep_storage
    from radstack.storage.metadata import MetadataStore
    from radstack.time.intervals import Interval
    from serving.broker.native import run_native_query
    from serving.broker.service import BrokerService
    from serving.broker.store.views import time_range_sql

    md = MetadataStore.from_url(settings.metadata_url)
    svc = BrokerService(settings, md, open_deep_storage(settings))
    t0 = time.perf_counter()
    svc.refresh()
    st = svc.datasource(DS)
    assert st is not None
    print(f"broker loaded {len(st.chunks)} segments into memory in {time.perf_counter() - t0:.1f}s")
    files = [str(_parquet_of(c.loaded)) for c in st.chunks]
    iv = Interval.parse(INTERVAL)
    pred = time_range_sql(iv.start, iv.end)
    cur = svc.connection()
    n_rows = cur.execute(f'SELECT count(*) FROM "{DS}" WHERE {pred}').fetchone()[0]  # type: ignore[index]
    raw = duckdb.connect()
    raw.execute(f"SET threads = {cores}")
    raw_src = f"read_parquet({files!r})"
    out = []
    native = {
        "count": {"type": "count", "name": "c"},
        "sum": {"type": "longSum", "name": "s", "fieldName": "m1"},
    }
    for kind, agg in (("count", "count(*)"), ("sum", 'sum("m1")')):
        t_view = timed(lambda a=agg: cur.execute(f'SELECT {a} FROM "{DS}" WHERE {pred}').fetchall(), repeat)
        t_raw = timed(lambda a=agg: raw.execute(f"SELECT {a} FROM {raw_src} WHERE {pred}").fetchall(), repeat)
        q = {"queryType": "timeseries", "dataSource": DS, "intervals": [INTERVAL], "granularity": "all",
             "aggregations": [native[kind]], "context": {"noProjections": True}}  # a scan rate reads base rows
        t_native = timed(lambda q=q: run_native_query(svc, q), repeat)
        out.append({"query": kind, "rows": n_rows, "view_s": t_view, "raw_s": t_raw, "native_s": t_native,
                    "view_rate": n_rows / t_view / cores, "raw_rate": n_rows / t_raw / cores,
                    "native_rate": n_rows / t_native / cores, "ratio": t_view / t_raw,
                    "native_ratio": t_native / t_raw, "paper": PAPER[kind]})
    svc.stop()
    md.close()
    return out


def _parquet_of(loaded: Any) -> Path:
    """The segment's Parquet file in (local) deep storage: the raw-DuckDB baseline reads it."""
    return Path(loaded.segment.load_spec["path"])


def spawn_server(home: Path, env: dict[str, str] | None = None, log_name: str = "bench-server.log",
                 repo: Path = ROOT) -> tuple[subprocess.Popen[bytes], str]:
    """Start the real server of checkout ``repo`` (uvicorn, its own process group, log under
    ``{home}/logs``) without waiting."""
    port = free_port()
    logs = home / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = open(logs / log_name, "ab")  # noqa: SIM115 - lives as long as the server
    code = ("import uvicorn; from radstack.config import load_settings; from operations.server import create_server_app as create_app; "
            f"uvicorn.run(create_app(load_settings()), host='127.0.0.1', port={port}, log_level='warning')")
    full_env = {**os.environ, "RADSTACK_HOME": str(home), "PYTHONPATH": str(repo), **(env or {})}
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=log, stderr=subprocess.STDOUT, env=full_env,
                            start_new_session=True, cwd=repo)
    return proc, f"http://127.0.0.1:{port}"


def start_server(home: Path, env: dict[str, str] | None = None, log_name: str = "bench-server.log",
                 repo: Path = ROOT) -> tuple[subprocess.Popen[bytes], str]:
    """Start the real server and wait until it serves the datasource."""
    proc, url = spawn_server(home, env, log_name, repo)
    deadline = time.time() + 300
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited; see {home / 'logs' / log_name}")
        try:
            r = httpx.get(f"{url}/druid/v2/datasources", timeout=2)
            if r.status_code == 200 and DS in r.json():
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    stop_server(proc)
    raise RuntimeError("server did not serve the datasource in time")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def memory(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process (a server :func:`start_server` started), in bytes."""
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(status["VmRSS"].split()[0]) * 1024, int(status["VmHWM"].split()[0]) * 1024


def dashboard_queries(interval: str) -> dict[str, tuple[str, Any]]:
    a, b = interval.split("/")
    where = f"__time >= TIMESTAMP '{a} 00:00:00' AND __time < TIMESTAMP '{b} 00:00:00'"
    return {
        "native timeseries by hour": ("/druid/v2", {
            "queryType": "timeseries", "dataSource": DS, "intervals": [interval], "granularity": "hour",
            "aggregations": [{"type": "count", "name": "rows"}, {"type": "longSum", "name": "m1", "fieldName": "m1"}]}),
        "native topN 10 on d100k": ("/druid/v2", {
            "queryType": "topN", "dataSource": DS, "intervals": [interval], "granularity": "all",
            "dimension": "d100k", "metric": "m1", "threshold": 10,
            "aggregations": [{"type": "longSum", "name": "m1", "fieldName": "m1"}]}),
        "native groupBy d10,d100 filtered": ("/druid/v2", {
            "queryType": "groupBy", "dataSource": DS, "intervals": [interval], "granularity": "all",
            "dimensions": ["d10", "d100"], "filter": {"type": "in", "dimension": "d1k",
                                                      "values": [f"d1k_{i}" for i in range(0, 50)]},
            "aggregations": [{"type": "longSum", "name": "m1", "fieldName": "m1"},
                             {"type": "doubleSum", "name": "m2", "fieldName": "m2"}]}),
        "SQL timeseries by hour": ("/druid/v2/sql", {"query":
            f"SELECT TIME_FLOOR(__time, 'PT1H') AS t, COUNT(*) AS c, SUM(m1) AS m1 FROM {DS} WHERE {where} "
            "GROUP BY 1 ORDER BY 1"}),
        "SQL topN 10 on d100k": ("/druid/v2/sql", {"query":
            f"SELECT d100k, SUM(m1) AS m1 FROM {DS} WHERE {where} GROUP BY 1 ORDER BY 2 DESC LIMIT 10"}),
        "SQL groupBy d10,d100 filtered": ("/druid/v2/sql", {"query":
            f"SELECT d10, d100, SUM(m1) AS m1, SUM(m2) AS m2 FROM {DS} WHERE {where} AND d1k IN ("
            + ", ".join(f"'d1k_{i}'" for i in range(50)) + ") GROUP BY 1, 2"}),
    }


def _pct(times: list[float], q: float) -> float:
    times = sorted(times)
    return times[min(len(times) - 1, int(len(times) * q))]


def latency(url: str, queries: dict[str, tuple[str, Any]], n: int) -> list[dict[str, Any]]:
    """Per query: ``n`` requests reading the base rows (context ``noProjections``) and ``n`` letting
    the broker pick a projection, interleaved pair by pair; the answers must be the same."""
    out = []
    with httpx.Client(base_url=url, timeout=120) as client:
        for name, (path, body) in queries.items():
            base_body = {**body, "context": {**body.get("context", {}), "noProjections": True}}
            r, rb = client.post(path, json=body), client.post(path, json=base_body)
            if r.status_code != 200 or rb.status_code != 200:
                out.append({"query": name, "error": f"{r.status_code} {r.text[:200]}"})
                continue
            if not _same(_rows(r.json()), _rows(rb.json())):
                raise SystemExit(f"{name}: the projection's answer differs from the base rows'")
            times: list[float] = []
            base: list[float] = []
            for _ in range(n):
                for b, sink in ((base_body, base), (body, times)):
                    t0 = time.perf_counter()
                    client.post(path, json=b).raise_for_status()
                    sink.append((time.perf_counter() - t0) * 1000)
            out.append({"query": name, "p50": _pct(times, 0.5), "p99": _pct(times, 0.99), "n": n,
                        "base_p50": _pct(base, 0.5), "base_p99": _pct(base, 0.99),
                        "projection": r.headers.get("X-Radstack-Projection", "-")})
    return out


def latency_vs(url: str, vs_url: str, queries: dict[str, tuple[str, Any]], n: int) -> list[dict[str, Any]]:
    """Per query: ``n`` requests to each server, alternating which goes first; the answers must be the same."""
    out = []
    with httpx.Client(base_url=url, timeout=120) as ours, httpx.Client(base_url=vs_url, timeout=120) as theirs:
        for name, (path, body) in queries.items():
            a, b = ours.post(path, json=body), theirs.post(path, json=body)
            if a.status_code != 200 or b.status_code != 200:
                out.append({"query": name, "error": f"{a.status_code}/{b.status_code} {a.text[:200]} {b.text[:200]}"})
                continue
            if not _same(_rows(a.json()), _rows(b.json())):
                raise SystemExit(f"{name}: the two checkouts answer differently")
            times: dict[str, list[float]] = {"ours": [], "vs": []}
            for i in range(n):
                pair = (("ours", ours), ("vs", theirs))
                for side, client in pair if i % 2 == 0 else pair[::-1]:
                    t0 = time.perf_counter()
                    client.post(path, json=body).raise_for_status()
                    times[side].append((time.perf_counter() - t0) * 1000)
            p50, vs50 = _pct(times["ours"], 0.5), _pct(times["vs"], 0.5)
            out.append({"query": name, "p50": p50, "vs_p50": vs50, "ratio": p50 / vs50, "n": n})
    return out


def vs_repo(home: Path, repo: Path, requests: int, requests_full: int) -> None:
    """Step 4 of the module's docstring: this checkout's server and ``repo``'s, the mix interleaved."""
    vs_home = home.with_name(home.name + "-vs")
    shutil.rmtree(vs_home, ignore_errors=True)
    shutil.copytree(home, vs_home, ignore=shutil.ignore_patterns("run", "logs"))
    proc, url = start_server(home)
    try:
        vs_proc, vs_url = start_server(vs_home, log_name="bench-server-vs.log", repo=repo)
    except BaseException:
        stop_server(proc)
        raise
    ratios: list[float] = []
    try:
        for label, interval, n in (("one day", "2025-01-15/2025-01-16", requests),
                                   ("all 30 days", INTERVAL, requests_full)):
            print(f"\n## dashboard latency, this checkout vs {repo} ({label}; {n} requests to each, interleaved)")
            print("| query | this checkout p50 ms | vs p50 ms | this / vs |")
            print("|---|---|---|---|")
            for r in latency_vs(url, vs_url, dashboard_queries(interval), n):
                if "error" in r:
                    print(f"| {r['query']} | error: {r['error']} | | |")
                    continue
                ratios.append(r["ratio"])
                print(f"| {r['query']} | {r['p50']:.1f} | {r['vs_p50']:.1f} | {r['ratio']:.2f}× |")
        rss = {side: memory(p.pid)[1] for side, p in (("this", proc), ("vs", vs_proc))}
        geo = statistics.geometric_mean(ratios) if ratios else float("nan")
        print(f"\ngeometric mean of this / vs (baseline: {repo}): {geo:.3f}×; peak RSS this "
              f"{rss['this'] / 2**20:.0f} MB, vs {rss['vs'] / 2**20:.0f} MB")
    finally:
        stop_server(vs_proc)
        stop_server(proc)
        shutil.rmtree(vs_home, ignore_errors=True)


def _rows(answer: Any) -> Any:
    """An answer with its top-level rows in a canonical order (a GROUP BY without ORDER BY has none)."""
    if not isinstance(answer, list):
        return answer
    return sorted(answer, key=lambda row: repr(_rounded(row)))


def _rounded(v: Any) -> Any:
    if isinstance(v, float):
        return float(f"{v:.9g}")
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_rounded(x) for x in v]
    return v


def _same(a: Any, b: Any) -> bool:
    """Equal JSON answers, doubles to 1e-9 relative (a sum in another order rounds differently)."""
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--home", default="/tmp/radstack-bench")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--requests", type=int, default=100, help="requests per query, one-day interval")
    ap.add_argument("--requests-full", type=int, default=20, help="requests per query, all 30 days")
    ap.add_argument("--skip-http", action="store_true")
    ap.add_argument("--vs-repo", type=Path, default=None,
                    help="another checkout: its server beside this one's, the dashboard mix interleaved (step 4)")
    args = ap.parse_args()
    home = Path(args.home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    os.environ["RADSTACK_HOME"] = str(home)
    from radstack.config import load_settings

    settings = load_settings(env={"RADSTACK_HOME": str(home)})
    cores = os.cpu_count() or 1
    load(settings, args.rows)
    if args.vs_repo is not None:
        vs_repo(home, args.vs_repo.resolve(), args.requests, args.requests_full)
        return
    print(f"\n## scan rate ({cores} cores, median of {args.repeat})")
    print("| query | rows | radstack view | rows/s/core | native timeseries | raw DuckDB on Parquet | rows/s/core | "
          "view / raw | paper (Druid) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in scan_rates(settings, cores, args.repeat):
        print(f"| {r['query']} | {r['rows']:,} | {r['view_s'] * 1000:.1f} ms | {r['view_rate'] / 1e6:.1f} M | "
              f"{r['native_s'] * 1000:.1f} ms ({r['native_rate'] / 1e6:.1f} M) | {r['raw_s'] * 1000:.1f} ms | "
              f"{r['raw_rate'] / 1e6:.1f} M | {r['ratio']:.2f} (native {r['native_ratio']:.2f}) | "
              f"{r['paper'] / 1e6:.1f} M |")
    if args.skip_http:
        return
    proc, url = start_server(home)
    try:
        for label, interval, n in (("one day", "2025-01-15/2025-01-16", args.requests),
                                   ("all 30 days", INTERVAL, args.requests_full)):
            print(f"\n## dashboard latency over HTTP, {label} ({n} sequential requests each, base rows and "
                  "projection interleaved)")
            print("| query | projection | p50 ms | p99 ms | base rows p50 ms | base rows p99 ms | p50 base / projection |")
            print("|---|---|---|---|---|---|---|")
            for r in latency(url, dashboard_queries(interval), n):
                if "error" in r:
                    print(f"| {r['query']} | error: {r['error']} | | | | | |")
                else:
                    print(f"| {r['query']} | {r['projection']} | {r['p50']:.1f} | {r['p99']:.1f} | "
                          f"{r['base_p50']:.1f} | {r['base_p99']:.1f} | {r['base_p50'] / r['p50']:.1f}× |")
    finally:
        stop_server(proc)


if __name__ == "__main__":
    main()
