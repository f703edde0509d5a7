"""What the trust work of #34 costs: loading segments through Arrow into the locked DuckDB, and checking
every statement's tables by scope before it runs — each against its baseline in the same run.

    .venv/bin/python benchmarks/bench_query_guard.py [--rows 2000000] [--repeat 5]

1. **Segment load.** One segment file of ``--rows`` rows (5 dimensions, 3 metrics, the indexer's own
   format) is loaded into DuckDB the way the broker did before (``CREATE TABLE … AS SELECT … FROM
   read_parquet(…)`` on an open connection: the baseline) and the way it does now (``pyarrow.parquet``
   streaming record batches into the same ``CREATE TABLE`` on a locked connection, which opens no file). Each run is a
   child process, alternating, so its peak RSS is its own; prints the median seconds and peak RSS of each
   and the ratio new / baseline.
2. **Planning.** A dashboard mix of Druid SQL statements (CTEs, subqueries, joins) is translated with a
   fresh catalog each time (no memo): prints the median translation time and the share of it spent in
   the two new checks (scope resolution of CTE references, the relation allow-list), measured on the
   same trees in the same run.
3. **Native statements.** The statement check of a native query's SQL, uncached (first time the text is
   seen) and cached (a dashboard repeating it), against the time DuckDB takes to run it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DASHBOARD_SQL = [
    "SELECT TIME_FLOOR(__time, 'PT1H') AS h, SUM(m1) AS s FROM bench GROUP BY 1 ORDER BY 1",
    "SELECT d4, COUNT(*) AS n FROM bench WHERE __time >= TIMESTAMP '2026-01-01' GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 10",
    "WITH top AS (SELECT d1, SUM(m1) AS s FROM bench GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 5) "
    "SELECT b.d2, SUM(b.m2) AS s FROM bench b JOIN top t ON b.d1 = t.d1 GROUP BY 1",
    "SELECT d1, (SELECT COUNT(*) FROM bench) AS total FROM (WITH x AS (SELECT d1 FROM bench) SELECT d1 FROM x) s "
    "WHERE d1 IN (SELECT d1 FROM bench WHERE m3 > 0.5) GROUP BY 1",
]


def _segment(rows: int, path: Path) -> None:
    rng = np.random.default_rng(7)
    t0 = 1_767_225_600_000
    table = pa.table({
        "__time": pa.array(np.sort(rng.integers(t0, t0 + 86_400_000, rows)), pa.int64()).cast(pa.timestamp("ms")),
        **{f"d{i}": pa.array([f"v{x}" for x in rng.integers(0, card, rows)])
           for i, card in enumerate((10, 100, 1000, 10_000, 100_000))},
        "m1": rng.integers(0, 1000, rows), "m2": rng.integers(0, 10, rows), "m3": rng.random(rows),
    })
    pq.write_table(table, path, row_group_size=65_536, compression="zstd")


def _load_child(mode: str, path: str) -> None:
    """Run in a child: load the file one way; print seconds and peak RSS as JSON."""
    import duckdb

    from radstack.duckdb_sandbox import sandboxed_connection
    from serving.broker.store.segment_cache import _copy_into

    t = time.perf_counter()
    if mode == "baseline":
        con = duckdb.connect(":memory:")
        names = [r[0] for r in con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [path]).fetchall()]
        select = ", ".join('CAST("__time" AS TIMESTAMP) AS "__time"' if n == "__time" else f'"{n}"' for n in names)
        con.execute(f"CREATE TABLE seg AS SELECT {select} FROM read_parquet(?)", [path])
    else:
        con = sandboxed_connection()
        _copy_into(con, "seg", Path(path))
    n = con.execute("SELECT count(*) FROM seg").fetchone()[0]
    secs = time.perf_counter() - t
    print(json.dumps({"seconds": secs, "rows": n,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def bench_load(rows: int, repeat: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "data.parquet"
        _segment(rows, path)
        runs: dict[str, list[dict[str, float]]] = {"baseline": [], "arrow": []}
        for _ in range(repeat):
            for mode in runs:
                out = subprocess.run([sys.executable, __file__, "--child", mode, str(path)], check=True,
                                     capture_output=True, text=True, cwd=ROOT).stdout
                runs[mode].append(json.loads(out.strip().splitlines()[-1]))
    med = {m: statistics.median(r["seconds"] for r in rs) for m, rs in runs.items()}
    rss = {m: statistics.median(r["peak_rss_mb"] for r in rs) for m, rs in runs.items()}
    return {"rows": rows, "baseline_read_parquet_s": round(med["baseline"], 3), "arrow_locked_s": round(med["arrow"], 3),
            "ratio_time": round(med["arrow"] / med["baseline"], 2),
            "baseline_peak_rss_mb": round(rss["baseline"]), "arrow_peak_rss_mb": round(rss["arrow"]),
            "ratio_peak_rss": round(rss["arrow"] / rss["baseline"], 2)}


def bench_planning(repeat: int) -> dict[str, float]:
    from sqlglot import exp

    from serving.broker.queries.relations import check_relations, cte_references
    from serving.broker.sql.catalog import Catalog, ColumnInfo
    from serving.broker.sql.dialect import parse
    from serving.broker.sql.translate import translate

    cols = [ColumnInfo("__time", "LONG", "time")] + [ColumnInfo(f"d{i}", "STRING") for i in range(5)] + [
        ColumnInfo("m1", "LONG", "metric"), ColumnInfo("m2", "LONG", "metric"), ColumnInfo("m3", "DOUBLE", "metric")]
    total, checks = [], []
    for _ in range(repeat * 20):
        for sql in DASHBOARD_SQL:
            catalog = Catalog({"bench": cols})
            t = time.perf_counter()
            tr = translate(sql, catalog)
            total.append(time.perf_counter() - t)
            tree = parse(sql)[0]
            t = time.perf_counter()
            cte_references(tree)
            check_relations(exp.maybe_parse(tr.sql, dialect="duckdb"), catalog.relations({"bench"}))
            checks.append(time.perf_counter() - t)
    t_med, c_med = statistics.median(total), statistics.median(checks)
    return {"statements": len(DASHBOARD_SQL), "translate_p50_ms": round(t_med * 1000, 2),
            "checks_p50_ms": round(c_med * 1000, 2), "checks_share_of_translate": round(c_med / t_med, 2)}


def bench_native(repeat: int) -> dict[str, float]:
    from radstack.duckdb_sandbox import sandboxed_connection
    from serving.broker.queries.relations import check_statement

    con = sandboxed_connection()
    con.execute("CREATE TABLE bench AS SELECT range AS m1, range % 100 AS d1, TIMESTAMP '2026-01-01' AS __time "
                "FROM range(1000000)")
    base = 'SELECT d1, SUM(m1) AS s FROM (SELECT * FROM "bench" WHERE "__time" >= TIMESTAMP \'2026-01-01\') AS __base'
    uncached, cached, run = [], [], []
    for i in range(repeat * 20):
        sql = f"{base} WHERE m1 > {i} GROUP BY ALL ORDER BY 2 DESC LIMIT 10"
        allowed = frozenset({"bench"})
        t = time.perf_counter()
        check_statement(sql, allowed)
        uncached.append(time.perf_counter() - t)
        t = time.perf_counter()
        check_statement(sql, allowed)
        cached.append(time.perf_counter() - t)
        t = time.perf_counter()
        con.execute(sql).fetchall()
        run.append(time.perf_counter() - t)
    return {"check_uncached_p50_ms": round(statistics.median(uncached) * 1000, 3),
            "check_cached_p50_ms": round(statistics.median(cached) * 1000, 4),
            "duckdb_run_p50_ms": round(statistics.median(run) * 1000, 2),
            "uncached_check_share_of_run": round(statistics.median(uncached) / statistics.median(run), 2)}


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        _load_child(sys.argv[2], sys.argv[3])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    out = {"load_avg": os.getloadavg()[0],
           "segment_load (baseline: DuckDB read_parquet on an open connection)": bench_load(args.rows, args.repeat),
           "planning (baseline: the whole translation)": bench_planning(args.repeat),
           "native statement check (baseline: DuckDB running it)": bench_native(args.repeat)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
