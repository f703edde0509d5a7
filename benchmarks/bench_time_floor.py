"""What one floor for every target (#37) does to Druid SQL's ``TIME_FLOOR`` with an origin or an odd
period: before, those ran through the ``DRUID_TIME_FLOOR`` Python UDF (``Granularity.bucket_start`` per
row, still the fallback for the few forms SQL cannot say); now :mod:`radstack.time.floor` renders them
as SQL. Both run in one DuckDB over the same ``--rows`` TIMESTAMPs in the same process, alternating;
the one-unit ``DATE_TRUNC`` form (unchanged) is there as a reference point.

    .venv/bin/python benchmarks/bench_time_floor.py [--rows 2000000] [--repeat 5]

Prints, per granularity, the median seconds of ``SELECT COUNT(DISTINCT floor)`` both ways, the ratio
SQL / UDF (the baseline), whether the answers are equal, and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import json
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

from radstack.time.floor import time_floor_sql  # noqa: E402  (after the path insert above)
from serving.broker.store.udfs import register  # noqa: E402

CASES = [  # (period, origin, zone)
    ("PT1H", 1_704_069_000_000, "UTC"),  # an hour from :30
    ("PT45M", None, "UTC"),  # a step that does not tile the hour
    ("P1D", 1_704_088_800_000, "America/Los_Angeles"),  # days from a 22:00 origin, zoned
    ("P2W", None, "Europe/Berlin"),  # two weeks, zoned
    ("P3M", 1_706_745_600_000, "UTC"),  # quarters from February
]


def _timed(con: duckdb.DuckDBPyConnection, sql: str, repeat: int) -> tuple[float, int]:
    times, answer = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        answer = con.execute(sql).fetchone()[0]
        times.append(time.perf_counter() - t0)
    return statistics.median(times), answer


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(37)
    t0 = 1_704_067_200_000  # 2024-01-01
    ms = rng.integers(t0, t0 + 400 * 86_400_000, args.rows)
    con = duckdb.connect()
    con.register("src", pa.table({"__time": pa.array(ms, pa.int64()).cast(pa.timestamp("ms"))}))
    con.execute("CREATE TABLE t AS SELECT CAST(__time AS TIMESTAMP) AS __time FROM src")
    register(con, {"DRUID_TIME_FLOOR"})
    out = []
    trunc_s, _ = _timed(con, "SELECT COUNT(DISTINCT date_trunc('day', __time)) FROM t", args.repeat)
    for period, origin, tz in CASES:
        sql_floor = time_floor_sql('epoch_ms("__time")', period, origin, tz)
        udf = f"""DRUID_TIME_FLOOR(epoch_ms("__time"), '{period}', {"NULL" if origin is None else origin}, '{tz}')"""
        sql_s, sql_answer = _timed(con, f"SELECT COUNT(DISTINCT {sql_floor}) FROM t", args.repeat)
        udf_s, udf_answer = _timed(con, f"SELECT COUNT(DISTINCT {udf}) FROM t", args.repeat)
        same = con.execute(f"SELECT COUNT(*) FROM t WHERE {sql_floor} <> {udf}").fetchone()[0] == 0
        out.append({"period": period, "origin": origin, "zone": tz, "sql_s": round(sql_s, 4),
                    "udf_baseline_s": round(udf_s, 4), "ratio_sql_vs_udf": round(sql_s / udf_s, 4),
                    "buckets": sql_answer, "equal_answers": same and sql_answer == udf_answer})
        print(f"{period:>6} origin={origin} {tz:<20} SQL {sql_s:7.3f}s  UDF (baseline) {udf_s:7.3f}s  "
              f"ratio {sql_s / udf_s:6.3f}  equal={out[-1]['equal_answers']}")
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"reference: date_trunc('day') over the same rows {trunc_s:.3f}s; peak RSS {rss_mb:.0f} MB; rows {args.rows}")
    print(json.dumps({"rows": args.rows, "baseline": "DRUID_TIME_FLOOR Python UDF (Granularity.bucket_start)",
                      "cases": out, "date_trunc_day_s": round(trunc_s, 4), "peak_rss_mb": round(rss_mb)}))


if __name__ == "__main__":
    main()
