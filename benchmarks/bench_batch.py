"""Batch rebuild speed: one day of raw ``ads`` impressions, rebuilt from the archive, against a plain
Spark job that only reads the same raw files and counts them — in one run, on this machine.

    .venv/bin/python benchmarks/bench_batch.py [--events 10000000] [--duplicates 0.02] [--keep DIR]

1. Writes the archive directly in the archiver's format (``realtime.archiver.records.SCHEMA``, one
   Parquet file per event hour and flush under ``raw/impressions/dt=…/hour=…/``, ZSTD) — vectorised,
   to save the time of going through Kafka; the JSON values look like the ``ads`` generator's.
2. Baseline: ``spark.read.parquet(hours).where(length(value) > 0).count()`` (reads every value).
3. Rebuild: :func:`batch.rebuild_job.rebuild` of the whole day for the ``ads`` example spec (hourly
   segments): ``from_json`` + validation, transforms, one shuffle on the rollup key, the sort, dedup +
   rollup + Parquet on the executors, renumbering, one publish — same session settings.

Prints wall times, events/s, events/s/core, the ratio rebuild / baseline, the peak resident memory of
the driver program, the JVM and Spark's Python workers during the rebuild, and the load average (JSON
on the last line). ``ratio`` and ``rebuild_events_per_s_per_core`` are the first rebuild's — a cold
one, as a scheduled job runs (JIT and Python workers start with it); with ``--rounds N`` the rebuild
and the baseline run N times each, alternating, and ``warm_ratio`` / ``warm_rebuild_events_per_s_per_core``
compare the best warm runs of both (the same data, republished as a new version each time).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from radstack.storage.raw_archive import data_key  # noqa: E402
from radstack.time.intervals import Interval, parse_instant  # noqa: E402
from realtime.archiver.records import SCHEMA  # noqa: E402
from realtime.generators.ads import ADVERTISERS, CITIES, GENDERS, PUBLISHERS  # noqa: E402

DAY = parse_instant("2026-11-20T00:00:00Z")
HOUR = 3_600_000
TOPIC = "impressions"


def write_archive(root: Path | Any, events: int, duplicates: float, seed: int = 7, per_file: int = 250_000) -> int:
    """Write ``events`` unique impressions (+ duplicates) spread over DAY into a local folder (or any deep
    storage, e.g. HDFS for bench_cluster); returns records written."""
    from radstack.storage.deep_storage.local import LocalDeepStorage

    storage = LocalDeepStorage(root) if isinstance(root, Path) else root
    rng = np.random.default_rng(seed)
    per_hour = events // 24
    offset = 0
    written = 0
    pubs, advs, gens, cits = (pa.array(x) for x in (PUBLISHERS, ADVERTISERS, GENDERS, CITIES))
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        for h in range(24):
            n = per_hour + (events - per_hour * 24 if h == 23 else 0)
            start = DAY + h * HOUR
            times = np.sort(rng.integers(start, start + HOUR, n))
            ids = pc.binary_join_element_wise(
                "imp-", pa.array(np.arange(offset, offset + n).astype(str)), ""
            )
            price = pa.array(np.round(rng.lognormal(-0.7, 0.6, n), 4)).cast(pa.string())
            secs = pa.array(times.astype("datetime64[ms]"), pa.timestamp("ms"))
            # %S of a millisecond timestamp prints seconds with 3 decimals: 00:00:08.105
            iso = pc.binary_join_element_wise(pc.strftime(secs, format="%Y-%m-%dT%H:%M:%S"), "Z", "")
            pick = lambda arr, n=n: pc.take(arr, pa.array(rng.integers(0, len(arr), n)))  # noqa: E731
            value = pc.binary_join_element_wise(
                '{"timestamp":"', iso, '","impression_id":"', ids, '","publisher":"', pick(pubs),
                '","advertiser":"', pick(advs), '","gender":"', pick(gens), '","city":"', pick(cits),
                '","price":', price, "}", "",
            )  # fmt: skip
            tms = pa.array(times, pa.int64()).cast(pa.timestamp("ms"))
            if duplicates > 0:  # exact re-sends of random events of the same hour
                dup = rng.integers(0, n, int(n * duplicates))
                value = pa.concat_arrays([value, pc.take(value, pa.array(dup))])
                tms = pa.concat_arrays([tms, pc.take(tms, pa.array(dup))])
            m = len(value)
            for lo in range(0, m, per_file):
                hi = min(m, lo + per_file)
                k = hi - lo
                table = pa.Table.from_arrays(
                    [
                        pa.array([TOPIC] * k, pa.string()),
                        pa.array(np.zeros(k, np.int32)),
                        pa.array(np.arange(offset + lo, offset + hi), pa.int64()),
                        tms.slice(lo, k),
                        pa.array(np.zeros(k, np.int8)),
                        pa.nulls(k, pa.binary()),
                        value.slice(lo, k).cast(pa.binary()),
                        pa.nulls(k, SCHEMA.field("headers").type),
                        tms.slice(lo, k),
                        pa.array(np.zeros(k, bool)),
                        pa.array(np.ones(k, bool)),
                    ],
                    schema=SCHEMA,
                )
                local = Path(tmp) / "f.parquet"
                pq.write_table(table, local, compression="zstd")
                storage.put_file(local, data_key(TOPIC, 0, offset + lo, offset + hi - 1, start))
            offset += m
            written += m
    return written


class MemorySampler(threading.Thread):
    """Peak resident memory of this process tree, from ``/proc`` every 0.25 s: this Python process
    (the driver program: it gets only segment descriptors back), the JVM it started (Spark's driver
    and, in ``local[*]``, its executors) and Spark's Python workers, and the peak of their sum."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peaks = {"python_driver": 0, "jvm": 0, "python_workers": 0, "total": 0}
        self._stop_event = threading.Event()

    @staticmethod
    def _tree() -> list[tuple[int, str, int]]:
        """(pid, command name, RSS bytes) of this process and all its descendants."""
        parents: dict[int, int] = {}
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    stat = (d / "stat").read_text()
                    parents[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
                except (OSError, ValueError, IndexError):
                    continue
        me, out, todo = os.getpid(), [], [os.getpid()]
        while todo:
            pid = todo.pop()
            todo += [c for c, p in parents.items() if p == pid]
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            rss = int(fields.get("VmRSS", "0 kB").split()[0]) * 1024
            out.append((pid, "self" if pid == me else fields.get("Name", "").strip(), rss))
        return out

    def run(self) -> None:
        while not self._stop_event.wait(0.25):
            tree = self._tree()
            now = {"python_driver": sum(r for _, n, r in tree if n == "self"),
                   "jvm": sum(r for _, n, r in tree if n == "java"),
                   "python_workers": sum(r for _, n, r in tree if n.startswith("python") and n != "self")}  # fmt: skip
            now["total"] = sum(r for _, _, r in tree)
            for k, v in now.items():
                self.peaks[k] = max(self.peaks[k], v)

    def stop(self) -> dict[str, float]:
        self._stop_event.set()
        self.join()
        return {f"peak_rss_{k}_mb": round(v / 2**20) for k, v in self.peaks.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--duplicates", type=float, default=0.02)
    ap.add_argument("--partitions", type=int, default=0, help="Arrow partitions (default: cores × 2)")
    ap.add_argument("--driver-memory", default="6g", help="spark.driver.memory (local[*]: the whole job's heap)")
    ap.add_argument("--rounds", type=int, default=1, help="rebuilds (and baselines) to run; the first is cold")
    ap.add_argument("--keep", type=Path, default=None, help="work directory to keep (default: a temp dir)")
    ap.add_argument("--no-class-sharing", action="store_true",
                    help="start the driver JVM without the class-data sharing archive (jvm.class_sharing: false)")
    a = ap.parse_args()
    work = a.keep or Path(tempfile.mkdtemp(prefix="radstack-bench-batch-"))
    home = work / "home"
    (home / "datasources").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "examples" / "ads" / "ads.yaml", home / "datasources" / "ads.yaml")
    cores = os.cpu_count() or 1
    os.environ["RADSTACK_HOME"] = str(home)

    from radstack.config import load_settings

    parts = a.partitions or cores * 2
    settings = load_settings(env={"RADSTACK_HOME": str(home)},
                             overrides={"spark": {"shuffle_partitions": parts, "driver_memory": a.driver_memory},
                                        "batch": {"partitions": parts}, "jvm": {"class_sharing": not a.no_class_sharing}})  # fmt: skip
    t = time.monotonic()
    records = write_archive(Path(settings.deep_storage.path), a.events, a.duplicates)
    gen_s = time.monotonic() - t
    print(f"archive: {records:,} records ({a.events:,} unique) in {gen_s:.1f}s", flush=True)

    from pyspark.sql import functions as F

    from batch.archive_reader import archive_paths
    from batch.rebuild_job import rebuild
    from radstack.pipeline.spark_session import build_spark_session
    from radstack.storage.deep_storage import open_deep_storage

    t = time.monotonic()
    spark = build_spark_session(settings, app_name="bench-batch", kafka=False, log_name="bench-batch")
    start_s = time.monotonic() - t
    day = Interval(DAY, DAY + 24 * HOUR)
    paths = archive_paths(open_deep_storage(settings), TOPIC, day)
    spark.read.parquet(paths[0]).count()  # warm the JVM a little for both
    first_s = time.monotonic() - t
    print(f"Spark start {start_s:.1f}s, + first read {first_s:.1f}s (class-data sharing "
          f"{'off' if a.no_class_sharing else 'on when built'})", flush=True)

    def baseline() -> float:
        t = time.monotonic()
        n = spark.read.parquet(*paths).where(F.length("value") > 0).count()
        assert n == records, (n, records)
        return time.monotonic() - t

    base_s = baseline()
    print(f"baseline read+count: {base_s:.1f}s ({records / base_s:,.0f} events/s)", flush=True)

    sampler = MemorySampler()
    sampler.start()
    load_before = os.getloadavg()[0]
    t = time.monotonic()
    res = rebuild(settings, "ads", day, spark=spark, force=True)
    reb_s = time.monotonic() - t
    memory = sampler.stop()
    print(f"peak memory during the rebuild: {memory}", flush=True)
    assert res.events == a.events, (res.events, a.events)
    print(f"rebuild: {reb_s:.1f}s ({records / reb_s:,.0f} events/s, {records / reb_s / cores:,.0f}/s/core), "
          f"{len([s for s in res.segments if not s.is_tombstone])} segments, {res.rows:,} rows", flush=True)
    warm: dict[str, float] = {}
    if a.rounds > 1:
        bases, rebuilds = [], []
        for _ in range(a.rounds - 1):
            bases.append(baseline())
            t = time.monotonic()
            again = rebuild(settings, "ads", day, spark=spark, force=True)
            rebuilds.append(time.monotonic() - t)
            assert again.events == a.events and again.rows == res.rows, (again.events, again.rows)
        print(f"warm: baseline {', '.join(f'{b:.2f}' for b in bases)} s; rebuild {', '.join(f'{r:.1f}' for r in rebuilds)} s",
              flush=True)
        warm = {"warm_baseline_s": round(min(bases), 2), "warm_rebuild_s": round(min(rebuilds), 2),
                "warm_rebuild_events_per_s_per_core": round(records / min(rebuilds) / cores),
                "warm_ratio": round(min(rebuilds) / min(bases), 2)}  # fmt: skip
    out = {
        "events_unique": a.events, "records": records, "cores": cores, "partitions": parts,
        "baseline_s": round(base_s, 2), "rebuild_s": round(reb_s, 2),
        "baseline_events_per_s": round(records / base_s), "rebuild_events_per_s": round(records / reb_s),
        "rebuild_events_per_s_per_core": round(records / reb_s / cores), "ratio": round(reb_s / base_s, 2),
        "segments": len(res.segments), "rows": res.rows, "stats": res.stats,
        "driver_memory": settings.spark.driver_memory, "spark_start_s": round(start_s, 2),
        "spark_start_first_read_s": round(first_s, 2), "class_sharing": not a.no_class_sharing, **memory, **warm,
        "load_average_before": round(load_before, 2), "load_average_after": round(os.getloadavg()[0], 2),
    }  # fmt: skip
    print(json.dumps(out))
    spark.stop()
    if a.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
