"""Fair side by side: radstack's broker against DuckDB holding the same rows in memory, and against a real
Apache Druid 33 holding the same rows, on the dashboard mix of ``benchmarks/broker_bench.py``.

    .venv/bin/python benchmarks/bench_vs_druid.py [--rows 1000000] [--requests 40] [--home /tmp/radstack-vs-druid] [--skip-druid]

1. Generates ``--rows`` events with ``broker_bench.generate`` (30 days, 5 dimensions of cardinality
   10 … 100,000, 3 metrics) and indexes them into radstack (DAY segments, rollup off: the same
   segments ``broker_bench`` builds).
2. **Same process** — radstack's broker (``BrokerService``: its segments in the on-disk segment cache,
   read through DuckDB's buffer pool) answering the SQL form of each query with ``noProjections`` (base
   rows), against one DuckDB in-memory table holding the same rows answering the same SQL written for it
   directly. Both use every core. This is the honest lower bound for radstack's design: the ratio is
   what the broker adds (planning, the view over the datasource table, Arrow results). Warm: the median
   of ``--repeat`` runs; cold: the first run of the query by a broker just restarted on the same cache
   (its buffer pool empty; the operating system's page cache is not dropped).
3. **Over HTTP, radstack vs Druid** — a single-machine Druid 33 (``operations.druid_local``, tuned:
   full JIT, a processing thread per core, no caches) ingests the same rows (``index_parallel`` of
   JSON lines); radstack's server and Druid's broker get the same requests alternately (native and
   SQL, one day and all 30 days), ``--requests`` each after a warm-up; answers are checked equal first
   (topN: Druid's topN is approximate across segments, so only the first row is compared). Prints
   p50/p99 per query and the ratio radstack / Druid of the p50s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
import httpx
import orjson
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import broker_bench as bb  # noqa: E402 - the dataset and the dashboard mix are broker_bench's

DS = bb.DS
NO_CACHE = {"useCache": False, "populateCache": False, "useResultLevelCache": False,
            "populateResultLevelCache": False}


def sql_mix(interval: str) -> dict[str, str]:
    """The dashboard mix as SQL over ``{table}`` (radstack's datasource, or the DuckDB table)."""
    a, b = interval.split("/")
    where = f"__time >= TIMESTAMP '{a} 00:00:00' AND __time < TIMESTAMP '{b} 00:00:00'"
    return {
        "count": f"SELECT COUNT(*) AS c FROM {{table}} WHERE {where}",
        "sum": f"SELECT SUM(m1) AS s FROM {{table}} WHERE {where}",
        "timeseries by hour": f"SELECT {{hour}} AS t, COUNT(*) AS c, SUM(m1) AS m1 FROM {{table}} WHERE {where} "
                              "GROUP BY 1 ORDER BY 1",
        "topN 10 on d100k": f"SELECT d100k, SUM(m1) AS m1 FROM {{table}} WHERE {where} GROUP BY 1 ORDER BY 2 DESC, 1 "
                            "LIMIT 10",
        "groupBy d10,d100 filtered": f"SELECT d10, d100, SUM(m1) AS m1, SUM(m2) AS m2 FROM {{table}} WHERE {where} "
                                     "AND d1k IN (" + ", ".join(f"'d1k_{i}'" for i in range(50)) + ") "
                                     "GROUP BY 1, 2 ORDER BY 1, 2",
    }


def median_ms(fn: Any, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def in_memory(settings: Any, table: pa.Table, repeat: int) -> list[dict[str, Any]]:
    from radstack.storage.deep_storage import open_deep_storage
    from radstack.storage.metadata import MetadataStore
    from serving.broker.service import BrokerService
    from serving.broker.sql.engine import execute

    md = MetadataStore.from_url(settings.metadata_url)
    svc = BrokerService(settings, md, open_deep_storage(settings))
    svc.refresh()
    con = duckdb.connect()
    con.execute(f"SET threads = {os.cpu_count() or 1}")
    con.register("rows_arrow", table)
    con.execute("CREATE TABLE rows_mem AS SELECT make_timestamp(ts * 1000) AS __time, * EXCLUDE (ts) FROM rows_arrow "
                "ORDER BY __time")
    con.unregister("rows_arrow")

    def radstack(sql: str) -> list[Any]:
        res = execute(svc, sql, metadata=md, context={"noProjections": True})
        try:
            return [row for b in res.batches() for row in zip(*[c.to_pylist() for c in b.columns], strict=True)]
        finally:
            res.close()

    def cold(sql: str) -> float:
        """The first run of ``sql`` by a broker that has just opened the cache (an empty buffer pool)."""
        fresh = BrokerService(settings, md, open_deep_storage(settings))
        try:
            fresh.refresh()
            t0 = time.perf_counter()
            res = execute(fresh, sql, metadata=md, context={"noProjections": True})
            try:
                for _ in res.batches():
                    pass
            finally:
                res.close()
            return (time.perf_counter() - t0) * 1000
        finally:
            fresh.stop()

    out = []
    for span, interval in (("1 day", "2025-01-10/2025-01-11"), ("30 days", bb.INTERVAL)):
        for name, sql in sql_mix(interval).items():
            ours = sql.format(table=DS, hour="TIME_FLOOR(__time, 'PT1H')")
            theirs = sql.format(table="rows_mem", hour="time_bucket(INTERVAL 1 HOUR, __time)")
            t_cold = cold(ours)
            a, b = radstack(ours), con.execute(theirs).fetchall()
            if not bb._same(bb._rounded([list(map(_plain, r)) for r in a]),
                            bb._rounded([list(map(_plain, r)) for r in b])):
                raise SystemExit(f"{name} ({span}): radstack and DuckDB disagree")
            t_ours = median_ms(lambda s=ours: radstack(s), repeat)
            t_duck = median_ms(lambda s=theirs: con.execute(s).fetchall(), repeat)
            out.append({"span": span, "query": name, "radstack_ms": t_ours, "duckdb_ms": t_duck,
                        "ratio": t_ours / t_duck, "cold_ms": t_cold})
    svc.stop()
    md.close()
    return out


def _plain(v: Any) -> Any:
    """A value as both engines' Python results agree on (timestamps as ISO text)."""
    if hasattr(v, "isoformat"):
        return v.isoformat()[:19]
    if isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    return v


def druid_ingest(druid: Any, table: pa.Table, work: Path) -> float:
    from radstack.druid_cluster.submit import OverlordClient

    work.mkdir(parents=True, exist_ok=True)
    path = work / "rows.json"
    cols = table.column_names
    with path.open("wb") as fh:
        for batch in table.to_batches(200_000):
            data = batch.to_pydict()
            for i in range(batch.num_rows):
                fh.write(orjson.dumps({c: data[c][i] for c in cols}) + b"\n")
    spec = {k: v for k, v in bb.SCHEMA.items() if k != "projections"}  # Druid reads base rows too
    task = {"type": "index_parallel", "spec": {
        "dataSchema": {**spec, "granularitySpec": {**spec["granularitySpec"], "intervals": [bb.INTERVAL]}},
        "ioConfig": {"type": "index_parallel", "inputSource": {"type": "local", "baseDir": str(work), "filter": "*.json"},
                     "inputFormat": {"type": "json"}},
        "tuningConfig": {"type": "index_parallel", "partitionsSpec": {"type": "dynamic"},
                         "maxRowsInMemory": 500_000}}}
    t0 = time.perf_counter()
    with OverlordClient(druid.overlord_url) as client:
        st = client.wait_for_task(client.submit_task(task), timeout_s=3600, poll_s=1.0)
        if not st.ok:
            raise SystemExit(f"Druid ingestion failed: {st}")
        client.wait_for_load(DS, timeout_s=600)
    deadline = time.time() + 300
    while time.time() < deadline:  # the broker sees every segment
        r = httpx.post(f"{druid.broker_url}/druid/v2/sql", json={"query": f"SELECT COUNT(*) AS n FROM {DS}"}, timeout=60)
        if r.status_code == 200 and r.json() and r.json()[0]["n"] == table.num_rows:
            break
        time.sleep(1)
    return time.perf_counter() - t0


def _first_rows(answer: Any) -> Any:
    """A topN/top-10 answer's first row (Druid's topN is approximate across segments)."""
    if isinstance(answer, list) and answer and isinstance(answer[0], dict) and "result" in answer[0]:
        return [answer[0]["result"][:1]]
    return answer[:1] if isinstance(answer, list) else answer


def over_http(ours_url: str, druid_url: str, requests: int) -> list[dict[str, Any]]:
    out = []
    with httpx.Client(timeout=300) as client:
        for span, interval in (("1 day", "2025-01-10/2025-01-11"), ("30 days", bb.INTERVAL)):
            for name, (path, body) in bb.dashboard_queries(interval).items():
                ours_body = {**body, "context": {**body.get("context", {}), "noProjections": True}}
                druid_body = {**body, "context": {**body.get("context", {}), **NO_CACHE}}
                a = client.post(ours_url + path, json=ours_body)
                b = client.post(druid_url + path, json=druid_body)
                if a.status_code != 200 or b.status_code != 200:
                    raise SystemExit(f"{name}: radstack {a.status_code} {a.text[:200]} / Druid {b.status_code} {b.text[:200]}")
                ra, rb = a.json(), b.json()
                if "topN" in name:
                    ra, rb = _first_rows(ra), _first_rows(rb)
                if not bb._same(bb._rows(bb._rounded(ra)), bb._rows(bb._rounded(rb))):
                    raise SystemExit(f"{name} ({span}): radstack and Druid disagree:\n{json.dumps(ra)[:500]}\n"
                                     f"{json.dumps(rb)[:500]}")
                ours: list[float] = []
                theirs: list[float] = []
                for _ in range(requests):
                    for url, b_, sink in ((ours_url, ours_body, ours), (druid_url, druid_body, theirs)):
                        t0 = time.perf_counter()
                        client.post(url + path, json=b_).raise_for_status()
                        sink.append((time.perf_counter() - t0) * 1000)
                out.append({"span": span, "query": name, "radstack_p50": bb._pct(ours, 0.5),
                            "radstack_p99": bb._pct(ours, 0.99), "druid_p50": bb._pct(theirs, 0.5),
                            "druid_p99": bb._pct(theirs, 0.99),
                            "ratio": bb._pct(ours, 0.5) / bb._pct(theirs, 0.5)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=15, help="in-memory runs per query (median)")
    ap.add_argument("--home", default="/tmp/radstack-vs-druid")
    ap.add_argument("--skip-druid", action="store_true", help="only the in-memory comparison (a)")
    args = ap.parse_args()
    home = Path(args.home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    os.environ["RADSTACK_HOME"] = str(home)
    from operations.druid_local import LocalDruid, ensure_druid_jars
    from radstack.config import load_settings

    settings = load_settings(env={"RADSTACK_HOME": str(home)})
    bb.load(settings, args.rows)
    table = bb.generate(args.rows)
    load_avg = os.getloadavg()[0]

    print(f"\n## same process ({os.cpu_count()} cores, median of {args.repeat}; load average {load_avg:.2f}; "
          "baseline: one DuckDB in-memory table)")
    print("| span | query | radstack broker ms (warm cache) | DuckDB in-memory table ms | radstack / DuckDB | "
          "radstack cold cache ms |")
    print("|---|---|---:|---:|---:|---:|")
    for r in in_memory(settings, table, args.repeat):
        print(f"| {r['span']} | {r['query']} | {r['radstack_ms']:.1f} | {r['duckdb_ms']:.1f} | {r['ratio']:.2f} | "
              f"{r['cold_ms']:.1f} |")

    if args.skip_druid:
        return
    ensure_druid_jars()
    with tempfile.TemporaryDirectory(prefix="radstack-druid-bench-") as tmp:
        druid = LocalDruid(Path(tmp) / "druid", tuned=True)
        druid.start()
        proc = None
        try:
            secs = druid_ingest(druid, table, Path(tmp) / "input")
            print(f"\nDruid ingested {args.rows:,} rows in {secs:.0f} s")
            proc, url = bb.start_server(home)
            print(f"\n## over HTTP, radstack vs Druid 33 ({args.requests} requests each, alternating; "
                  f"load average {os.getloadavg()[0]:.2f})")
            print("| span | query | radstack p50 / p99 ms | Druid p50 / p99 ms | radstack / Druid (p50) |")
            print("|---|---|---:|---:|---:|")
            for r in over_http(url, druid.broker_url, args.requests):
                print(f"| {r['span']} | {r['query']} | {r['radstack_p50']:.1f} / {r['radstack_p99']:.1f} | "
                      f"{r['druid_p50']:.1f} / {r['druid_p99']:.1f} | {r['ratio']:.2f} |")
        finally:
            if proc is not None:
                bb.stop_server(proc)
            druid.stop()


if __name__ == "__main__":
    main()
