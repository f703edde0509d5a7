"""A native ``scan`` streamed batch by batch (#49 item 5) against the same scan built whole, same run:

    .venv/bin/python benchmarks/bench_native_scan.py [--rows 400000] [--repeat 5] [--wide 0]

One datasource of ``--rows`` rows (``--wide``: each row also carries a string of that many bytes) is
scanned in full through :func:`serving.broker.native.run_native_query` — with ``stream=True`` (what
``POST /druid/v2`` does now: the chunks are consumed as the HTTP route would write them) and with
``stream=False`` (the baseline: the answer encoded whole, as before), alternating, median of
``--repeat``; the two answers are compared byte for byte. Reported per mode: the wall time and the peak
of Python's own allocations while the answer is produced (tracemalloc: the rows, their JSON), which is
what streaming bounds. Peak RSS of the process is printed at the end.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from radstack.config import load_settings  # noqa: E402
from radstack.spec import parse_data_schema  # noqa: E402
from radstack.storage.deep_storage import open_deep_storage  # noqa: E402
from radstack.storage.indexer import index_partition  # noqa: E402
from radstack.storage.metadata import MetadataStore  # noqa: E402
from radstack.storage.publish import publish  # noqa: E402
from serving.broker.native import StreamedAnswer, run_native_query  # noqa: E402
from serving.broker.service import BrokerService  # noqa: E402

SCHEMA = {"dataSource": "scan_bench", "timestampSpec": {"column": "ts", "format": "millis"},
          "dimensionsSpec": {"dimensions": ["d1", "d2", "s"]},
          "metricsSpec": [{"type": "longSum", "name": "m1", "fieldName": "m1"}],
          "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none", "rollup": False}}
QUERY = {"queryType": "scan", "dataSource": "scan_bench", "intervals": ["2026-01-01/2026-01-08"],
         "columns": ["__time", "d1", "d2", "s", "m1"]}


def _table(rows: int, wide: int) -> pa.Table:
    rng = np.random.default_rng(7)
    t0 = 1_767_225_600_000
    return pa.table({"ts": np.sort(rng.integers(t0, t0 + 3 * 86_400_000, rows)),
                     "d1": [f"v{x}" for x in rng.integers(0, 100, rows)],
                     "d2": [f"w{x}" for x in rng.integers(0, 10_000, rows)],
                     "s": ["x" * wide] * rows, "m1": rng.integers(0, 1000, rows)})


def _answer(service: BrokerService, stream: bool, keep: bool = False) -> bytes:
    """The answer (``keep``), or only its length: a streamed answer's chunks are dropped as a socket takes them."""
    out = run_native_query(service, QUERY, encode=lambda rows: orjson.dumps(rows, option=orjson.OPT_SERIALIZE_NUMPY),
                           stream=stream)
    if isinstance(out, StreamedAnswer):
        if keep:
            return b"".join(out.chunks())
        return b"%d" % sum(len(chunk) for chunk in out.chunks())
    return out if keep else b"%d" % len(out)


def _measure(service: BrokerService, stream: bool) -> tuple[float, int, bytes]:
    tracemalloc.start()
    t = time.perf_counter()
    size = _answer(service, stream)
    elapsed = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return elapsed, peak, size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--wide", type=int, default=0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as home:
        settings = load_settings(env={"RADSTACK_HOME": home})
        metadata = MetadataStore.from_settings(settings)
        deep = open_deep_storage(settings)
        res = index_partition(_table(args.rows, args.wide), parse_data_schema(SCHEMA), version="v1",
                              deep_storage=deep, shard="core")
        publish(metadata, deep, res.segments)
        service = BrokerService(settings, metadata, deep)
        service.refresh()
        try:
            assert _answer(service, True, keep=True) == _answer(service, False, keep=True), "the two answers differ"
            streamed: list[tuple[float, int]] = []
            whole: list[tuple[float, int]] = []
            for _ in range(args.repeat):
                streamed.append(_measure(service, True)[:2])
                whole.append(_measure(service, False)[:2])
        finally:
            service.stop()
            metadata.close()
    s_t, w_t = statistics.median(t for t, _ in streamed), statistics.median(t for t, _ in whole)
    s_m, w_m = max(m for _, m in streamed), max(m for _, m in whole)
    print(f"native scan of {args.rows:,} rows (+{args.wide} B each), median of {args.repeat}; "
          "baseline = the same scan encoded whole (stream=False), same process, answers equal")
    print(f"{'mode':<10}{'ms':>10}{'python peak MB':>18}")
    print(f"{'streamed':<10}{s_t * 1000:>10.1f}{s_m / 2**20:>18.1f}")
    print(f"{'whole':<10}{w_t * 1000:>10.1f}{w_m / 2**20:>18.1f}")
    print(f"ratio streamed/whole: time {s_t / w_t:.3f}x, python peak {s_m / w_m:.3f}x")
    print(f"peak RSS of the process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
