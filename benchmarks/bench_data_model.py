"""What Druid's richer data model costs at query time: lookups, sketches, multi-value and JSON columns.

    .venv/bin/python benchmarks/bench_data_model.py [--rows 1000000] [--repeat 5]

Indexes ``--rows`` events (one day, hourly segments, rollup off) through the real indexer into a temp
home — a country code, a user id (100,000 values), a session id (a new one on every row), a
multi-value ``tags`` dimension, a ``json`` dimension, ``HLLSketchBuild`` metrics of the user and the
session and a ``thetaSketch`` of the user — serves them with a :class:`BrokerService` and times each
feature query against its plain baseline **in the same process, over the same loaded rows**:

* ``GROUP BY LOOKUP(country, 'names')`` vs ``GROUP BY country`` (a 250-key map lookup);
* ``APPROX_COUNT_DISTINCT_DS_HLL(users_hll)`` (merging ingested sketches: over all rows, per country,
  and over ``sessions_hll``, where no two rows' sketches are alike),
  ``APPROX_COUNT_DISTINCT_DS_THETA(users_theta)`` (merging ingested theta sketches) and
  ``APPROX_COUNT_DISTINCT_DS_HLL("user")`` (query-time sketch of raw values), and the native
  ``HLLSketchMerge`` / ``thetaSketch`` aggregators over the ingested sketches, vs DuckDB's own HLL
  ``APPROX_COUNT_DISTINCT`` of the same column, grouped the same way;
* ``GROUP BY tags`` (multi-value explosion) vs ``GROUP BY country``;
* ``JSON_VALUE(attrs, '$.plan')`` grouping vs ``GROUP BY country``.

Prints the median of ``--repeat`` runs per query and the ratio to its baseline (the two alternate, run by
run, so both see the same machine); the last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from radstack.config import Settings  # noqa: E402
from radstack.spec import parse_data_schema  # noqa: E402
from radstack.storage.deep_storage import open_deep_storage  # noqa: E402
from radstack.storage.indexer import index_partition  # noqa: E402
from radstack.storage.metadata import MetadataStore  # noqa: E402
from radstack.storage.publish import publish  # noqa: E402
from serving.broker.native import run_native_query  # noqa: E402
from serving.broker.service import BrokerService  # noqa: E402
from serving.broker.sql.engine import execute  # noqa: E402
from serving.lookups import CONFIG_KEY  # noqa: E402

START = 1_767_225_600_000  # 2026-01-01
SCHEMA: dict[str, Any] = {
    "dataSource": "events",
    "timestampSpec": {"column": "ts", "format": "millis"},
    "dimensionsSpec": {"dimensions": ["country", "user", "session", {"type": "string", "name": "tags", "multiValueHandling": "SORTED_ARRAY"},
                                      {"type": "json", "name": "attrs"}]},
    "metricsSpec": [{"type": "count", "name": "count"},
                    {"type": "HLLSketchBuild", "name": "users_hll", "fieldName": "user"},
                    {"type": "HLLSketchBuild", "name": "sessions_hll", "fieldName": "session"},
                    {"type": "thetaSketch", "name": "users_theta", "fieldName": "user"}],
    "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "none", "rollup": False},
}
QUERIES: list[tuple[str, str | dict[str, Any], str]] = [  # (name, query: SQL or a native query, baseline)
    ("lookup", "SELECT LOOKUP(country, 'names') AS c, COUNT(*) FROM events GROUP BY 1",
     "SELECT country, COUNT(*) FROM events GROUP BY 1"),
    ("hll_merge_ingested", "SELECT APPROX_COUNT_DISTINCT_DS_HLL(users_hll) FROM events",
     'SELECT APPROX_COUNT_DISTINCT("user") FROM events'),
    ("hll_merge_by_country", "SELECT country, APPROX_COUNT_DISTINCT_DS_HLL(users_hll) FROM events GROUP BY 1",
     'SELECT country, APPROX_COUNT_DISTINCT("user") FROM events GROUP BY 1'),
    ("hll_merge_all_distinct", "SELECT APPROX_COUNT_DISTINCT_DS_HLL(sessions_hll) FROM events",
     "SELECT APPROX_COUNT_DISTINCT(session) FROM events"),
    ("theta_merge_ingested", "SELECT APPROX_COUNT_DISTINCT_DS_THETA(users_theta) FROM events",
     'SELECT APPROX_COUNT_DISTINCT("user") FROM events'),
    ("hll_merge_native", {"queryType": "timeseries", "dataSource": "events", "granularity": "all",
                          "intervals": ["2026-01-01/2026-01-02"],
                          "aggregations": [{"type": "HLLSketchMerge", "name": "n", "fieldName": "users_hll"}]},
     'SELECT APPROX_COUNT_DISTINCT("user") FROM events'),
    ("theta_merge_native", {"queryType": "timeseries", "dataSource": "events", "granularity": "all",
                            "intervals": ["2026-01-01/2026-01-02"],
                            "aggregations": [{"type": "thetaSketch", "name": "n", "fieldName": "users_theta"}]},
     'SELECT APPROX_COUNT_DISTINCT("user") FROM events'),
    ("hll_raw_values", 'SELECT APPROX_COUNT_DISTINCT_DS_HLL("user") FROM events',
     'SELECT APPROX_COUNT_DISTINCT("user") FROM events'),
    ("multi_value_group_by", "SELECT tags, COUNT(*) FROM events GROUP BY 1",
     "SELECT country, COUNT(*) FROM events GROUP BY 1"),
    ("json_value_group_by", "SELECT JSON_VALUE(attrs, '$.plan') AS p, COUNT(*) FROM events GROUP BY 1",
     "SELECT country, COUNT(*) FROM events GROUP BY 1"),
]


def rows(n: int) -> pa.Table:
    rng = random.Random(7)
    countries = [f"C{i:03d}" for i in range(250)]
    tags = ["red", "green", "blue", "small", "large", "new", "old", "sale"]
    plans = ["free", "pro", "team", "enterprise"]
    return pa.table({
        "ts": [START + i * (86_400_000 // n) for i in range(n)],
        "country": [rng.choice(countries) for _ in range(n)],
        "user": [f"u{rng.randrange(100_000)}" for _ in range(n)],
        "session": [f"s{i}" for i in range(n)],  # every row its own value: no two sketches alike
        "tags": [json.dumps(rng.sample(tags, rng.randrange(0, 4))) for _ in range(n)],
        "attrs": [json.dumps({"plan": rng.choice(plans), "seats": rng.randrange(1, 50)}) for _ in range(n)],
    })


def timed(broker: BrokerService, metadata: MetadataStore, query: str | dict[str, Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        if isinstance(query, dict):
            run_native_query(broker, query)
        else:
            res = execute(broker, query, metadata=metadata)
            try:
                for _ in res.batches():
                    pass
            finally:
                res.close()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="radstack-bench-model-") as home:
        settings = Settings.model_validate({"home": home})
        metadata = MetadataStore.from_url(settings.metadata_url)
        metadata.create_tables()
        deep = open_deep_storage(settings)
        t0 = time.perf_counter()
        result = index_partition(rows(args.rows), parse_data_schema(SCHEMA), version="2026-01-02T00:00:00.000Z",
                                 deep_storage=deep)
        publish(metadata, deep, result.segments)
        index_s = time.perf_counter() - t0
        metadata.set_config(CONFIG_KEY, {"__default": {"names": {"version": "v1", "lookupExtractorFactory": {
            "type": "map", "map": {f"C{i:03d}": f"Country {i}" for i in range(250)}}}}})
        broker = BrokerService(settings, metadata, deep)
        broker.refresh()
        out: dict[str, Any] = {"rows": args.rows, "index_seconds": round(index_s, 1), "queries": {}}
        print(f"{args.rows:,} rows indexed in {index_s:.1f} s; median of {args.repeat} runs, baseline in the same process")
        print(f"{'query':24} {'ms':>9} {'baseline ms':>12} {'ratio':>7}")
        for name, sql, base in QUERIES:
            timed(broker, metadata, sql, 1)  # warm up
            pairs = [(timed(broker, metadata, sql, 1), timed(broker, metadata, base, 1)) for _ in range(args.repeat)]
            ms, base_ms = (statistics.median(p[i] for p in pairs) * 1000 for i in (0, 1))  # alternated, one by one
            out["queries"][name] = {"ms": round(ms, 1), "baseline_ms": round(base_ms, 1), "ratio": round(ms / base_ms, 2)}
            print(f"{name:24} {ms:9.1f} {base_ms:12.1f} {ms / base_ms:7.2f}")
        broker.stop()
        metadata.close()
        print(json.dumps(out))


if __name__ == "__main__":
    main()
