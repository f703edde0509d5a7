"""Memory and restart of the broker's on-disk segment cache: bytes per row, peak RSS, time to the first
correct answer after a cold start and after a restart.

    .venv/bin/python benchmarks/bench_segment_cache.py [--rows 10000000] [--home /tmp/radstack-bench]
                                                       [--memory-limit 2GB]

On a home that ``broker_bench.py`` generated (generated here when missing; above 20 M rows one day at a
time), in one run:

1. **The Parquet the rows come from**: the bytes of the datasource's segment files in deep storage.
2. **Baseline — the rows in memory**: a child process loads every segment file into an in-memory DuckDB
   table, one per segment, as the broker did before it kept its cache on disk; its resident memory.
3. **Cold start**: the real server (``operations.server`` under uvicorn) with ``server.memory_limit`` set
   and an empty ``{home}/segment-cache``, timed from process start to the first correct
   ``COUNT(*), SUM(m1)`` over HTTP (the truth: DuckDB over the Parquet files). Then the dashboard mix of
   ``broker_bench.py`` over all 30 days and over one day, base rows and projections; the server's
   resident memory after it (``VmRSS``) and at its peak (``VmHWM``), and the cache's size on disk.
4. **Restart**: the server stopped and started again on the cache it left: time to the first correct
   answer, the same mix (every answer must equal the cold run's), its memory.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import broker_bench as bb  # noqa: E402 - the dataset and the dashboard mix are broker_bench's

TRUTH_SQL = f'SELECT COUNT(*) AS n, SUM("m1") AS s FROM "{bb.DS}"'

#: the baseline child: every file into an in-memory DuckDB table (the old segment cache), then its memory
BASELINE = """
import sys, time, duckdb, pyarrow as pa, pyarrow.parquet as pq
con = duckdb.connect(":memory:", config={"memory_limit": "20GB"})
t0 = time.perf_counter()
for i, f in enumerate(sys.argv[1:]):
    pf = pq.ParquetFile(f)
    con.register("rows", pa.RecordBatchReader.from_batches(pf.schema_arrow, pf.iter_batches(batch_size=131072)))
    con.execute(f'CREATE TABLE s{i} AS SELECT * EXCLUDE ("__time"), CAST("__time" AS TIMESTAMP) AS "__time" FROM rows')
    con.unregister("rows")
loaded = time.perf_counter() - t0
n = sum(con.execute(f"SELECT count(*) FROM s{i}").fetchone()[0] for i in range(len(sys.argv) - 1))
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
print(n, loaded, int(status["VmRSS"].split()[0]) * 1024, int(status["VmHWM"].split()[0]) * 1024)
"""


def segment_files(home: Path) -> tuple[list[Path], int]:
    """The datasource's base Parquet files and the bytes of its projection files."""
    from radstack.storage.metadata import MetadataStore

    md = MetadataStore.from_url(f"sqlite:///{home / 'metadata.db'}")
    try:
        segs = md.segments(bb.DS)
    finally:
        md.close()
    files = [Path(s.load_spec["path"]) for s in segs]
    projections = sum(Path(p["loadSpec"]["path"]).stat().st_size for s in segs for p in s.projections)
    return files, projections


def baseline(files: list[Path]) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", BASELINE, *map(str, files)], capture_output=True, text=True,
                         check=True)
    n, loaded, rss, hwm = out.stdout.split()
    return {"rows": int(n), "load_s": float(loaded), "rss": int(rss), "hwm": int(hwm)}


def start(home: Path, memory_limit: str) -> tuple[subprocess.Popen[bytes], str, float]:
    """Start the server; (process, url, its start time on the perf counter)."""
    t0 = time.perf_counter()
    proc, url = bb.spawn_server(home, {"RADSTACK_SERVER__MEMORY_LIMIT": memory_limit}, "bench-segment-cache.log")
    return proc, url, t0


def first_correct_answer(proc: subprocess.Popen[bytes], url: str, t0: float, truth: list[Any]) -> float:
    """Seconds from ``t0`` to the first answer equal to ``truth`` (polled every 20 ms)."""
    with httpx.Client(base_url=url, timeout=60) as c:
        while True:
            if proc.poll() is not None:
                raise SystemExit("the server exited; see logs/bench-segment-cache.log")
            try:
                r = c.post("/druid/v2/sql", json={"query": TRUTH_SQL})
                if r.status_code == 200 and [[row["n"], row["s"]] for row in r.json()] == truth:
                    return time.perf_counter() - t0
            except httpx.HTTPError:
                pass
            if time.perf_counter() - t0 > 3600:
                raise SystemExit("no correct answer within an hour")
            time.sleep(0.02)


def mix(url: str, requests: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The dashboard mix over 30 days and one day: every answer (for the restart to match) and latencies."""
    answers: dict[str, Any] = {}
    rows = []
    with httpx.Client(base_url=url, timeout=600) as c:
        for label, interval in (("30 days", bb.INTERVAL), ("one day", "2025-01-15/2025-01-16")):
            queries = bb.dashboard_queries(interval)
            for name, (path, body) in queries.items():
                base = {**body, "context": {"noProjections": True}}
                answers[f"{label} {name}"] = bb._rows(c.post(path, json=base).raise_for_status().json())
            rows += [{"label": label, **r} for r in bb.latency(url, queries, requests)]
    return answers, rows


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--home", default="/tmp/radstack-bench")
    ap.add_argument("--memory-limit", default="2GB", help="server.memory_limit of the server under test")
    ap.add_argument("--requests", type=int, default=5, help="requests per query of the mix, per run")
    ap.add_argument("--no-baseline", action="store_true", help="skip the in-memory baseline (it needs ~120 B/row)")
    args = ap.parse_args()
    home = Path(args.home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    from radstack.config import load_settings

    bb.load(load_settings(env={"RADSTACK_HOME": str(home)}), args.rows)
    files, projection_bytes = segment_files(home)
    parquet = sum(f.stat().st_size for f in files)
    raw = duckdb.connect()
    n, s = raw.execute(f"SELECT count(*), sum(m1) FROM read_parquet({[str(f) for f in files]!r})").fetchone()  # type: ignore[misc]
    truth = [[int(n), int(s)]]
    mrows = n / 1e6
    print(f"# segment cache: {n:,} rows in {len(files)} segments, server.memory_limit {args.memory_limit}")
    print(f"Parquet in deep storage: {parquet / 1e6:,.0f} MB base rows ({parquet / n:.1f} B/row), "
          f"+ {projection_bytes / 1e6:,.1f} MB projections")
    print("\n| run | first correct answer | RSS after the mix | peak RSS | RSS per M rows | RSS / Parquet | "
          "cache on disk |")
    print("|---|---|---|---|---|---|---|")
    if not args.no_baseline:
        b = baseline(files)
        assert b["rows"] == n
        print(f"| baseline: in-memory DuckDB tables (the old cache) | loaded in {b['load_s']:.1f} s | "
              f"{b['rss'] / 1e6:,.0f} MB | {b['hwm'] / 1e6:,.0f} MB | {b['rss'] / mrows / 1e6:.1f} MB | "
              f"{b['rss'] / parquet:.2f}× | – |")
    cache = home / "segment-cache"
    subprocess.run(["rm", "-rf", str(cache)], check=True)
    answers: dict[str, Any] = {}
    latencies: dict[str, list[dict[str, Any]]] = {}
    for run in ("cold start (empty cache)", "restart (cache kept)"):
        proc, url, t0 = start(home, args.memory_limit)
        try:
            first = first_correct_answer(proc, url, t0, truth)
            got, latencies[run] = mix(url, args.requests)
            rss, hwm = bb.memory(proc.pid)
        finally:
            bb.stop_server(proc)
        differ = [k for k in answers if not bb._same(answers[k], got[k])]
        if differ:
            raise SystemExit(f"{run}: the mix answered differently from the cold start: {differ}")
        answers = got
        print(f"| {run} | {first:.2f} s | {rss / 1e6:,.0f} MB | {hwm / 1e6:,.0f} MB | {rss / mrows / 1e6:.1f} MB | "
              f"{rss / parquet:.2f}× | {du(cache) / 1e6:,.0f} MB |")
    for run, rows in latencies.items():
        print(f"\n## dashboard mix, {run} ({args.requests} requests per query after the first)")
        print("| interval | query | projection p50 ms | base rows p50 ms | base rows p99 ms |")
        print("|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['label']} | {r['query']} | {r['p50']:.1f} | {r['base_p50']:.1f} | {r['base_p99']:.1f} |")


if __name__ == "__main__":
    main()
