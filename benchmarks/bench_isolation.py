"""What the isolation work of #49 costs a dashboard, each against its baseline in the same run:

    .venv/bin/python benchmarks/bench_isolation.py [--rows 1000000] [--repeat 7]

1. **Value checks.** A dashboard mix of Druid SQL statements over ``--rows`` rows (the four of
   bench_query_guard, which build no string, plus two that build strings: a ``||`` key and a
   ``REPLACE``) is translated twice — with ``server.max_string_bytes`` 64 KiB (every growing function
   checked before it builds a value) and with 0 (no checks: the baseline) — and both run in the same
   DuckDB, alternating, median of ``--repeat``. Answers are compared for equality (as sorted rows: one
   statement has no ORDER BY). Prints the per-statement and whole-mix ratios.
2. **The memory guard.** One sample (read ``/proc/self/statm``, look at the running queries) costs this
   much; at 50 samples a second that is the guard's share of one core.

Peak RSS of the process is printed at the end.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_query_guard import DASHBOARD_SQL as GUARD_SQL  # noqa: E402

from serving.broker.queries.memory_guard import INTERVAL_SECONDS, MemoryGuard, resident_bytes  # noqa: E402
from serving.broker.queries.query_manager import QueryManager  # noqa: E402
from serving.broker.sql import Catalog, ColumnInfo, translate  # noqa: E402

#: the dashboard mix of bench_query_guard (no string built), and two statements that build strings
DASHBOARD_SQL = [
    *GUARD_SQL,
    "SELECT d1 || '/' || d2 AS k, SUM(m1) AS s FROM bench GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 20",
    "SELECT REPLACE(d3, 'v', 'value-') AS k, COUNT(*) AS n FROM bench GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 20",
]
COLUMNS = [("__time", "LONG", "time"), ("d1", "STRING"), ("d2", "STRING"), ("d3", "STRING"), ("d4", "STRING"),
           ("m1", "LONG", "metric"), ("m2", "LONG", "metric"), ("m3", "DOUBLE", "metric")]


def _table(rows: int) -> pa.Table:
    rng = np.random.default_rng(7)
    t0 = 1_767_225_600_000
    return pa.table({
        "__time": pa.array(np.sort(rng.integers(t0, t0 + 86_400_000, rows)), pa.int64()).cast(pa.timestamp("ms")),
        **{f"d{i}": pa.array([f"v{x}" for x in rng.integers(0, card, rows)])
           for i, card in zip(range(1, 5), (10, 100, 1000, 10_000), strict=True)},
        "m1": rng.integers(0, 1000, rows), "m2": rng.integers(0, 10, rows), "m3": rng.random(rows),
    })


def _time(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[float, list]:
    t = time.perf_counter()
    rows = con.execute(sql).fetchall()
    return time.perf_counter() - t, rows


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()
    con = duckdb.connect()
    con.register("bench_arrow", _table(args.rows))
    con.execute("CREATE TABLE bench AS SELECT * FROM bench_arrow")
    catalog = Catalog({"bench": [ColumnInfo(*c) for c in COLUMNS]})
    print(f"value checks: {len(DASHBOARD_SQL)} dashboard statements over {args.rows:,} rows, median of {args.repeat}; "
          "baseline = the same statements translated with server.max_string_bytes 0 (no checks), same DuckDB")
    print(f"{'statement':<60} {'checked ms':>11} {'baseline ms':>12} {'ratio':>7}")
    total_new = total_base = 0.0
    for q in DASHBOARD_SQL:
        checked = translate(q, catalog, max_string_bytes=64 * 1024).sql
        plain = translate(q, catalog, max_string_bytes=0).sql
        new, base = [], []
        for _ in range(args.repeat):
            t1, a = _time(con, checked)
            t2, b = _time(con, plain)
            assert sorted(map(repr, a)) == sorted(map(repr, b)), q
            new.append(t1)
            base.append(t2)
        n, b = statistics.median(new), statistics.median(base)
        total_new, total_base = total_new + n, total_base + b
        print(f"{q[:58]:<60} {n * 1000:>11.2f} {b * 1000:>12.2f} {n / b:>7.3f}")
    print(f"{'the whole mix':<60} {total_new * 1000:>11.2f} {total_base * 1000:>12.2f} {total_new / total_base:>7.3f}")

    guard = MemoryGuard(QueryManager(), budget_bytes=2**62)
    n = 20_000
    t = time.perf_counter()
    for _ in range(n):
        guard.sample(resident_bytes())
    per = (time.perf_counter() - t) / n
    print(f"memory guard: one sample {per * 1e6:.1f} µs; at one every {INTERVAL_SECONDS * 1000:.0f} ms "
          f"{per / INTERVAL_SECONDS * 100:.3f} % of one core")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
