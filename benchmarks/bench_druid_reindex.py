"""From a rebuild's publish in radstack to a Druid cluster serving the new version (#53): one hour of raw
``ads`` impressions rebuilt and re-indexed in a local Apache Druid 33, in one run on this machine.

    .venv/bin/python benchmarks/bench_druid_reindex.py [--events 100000] [--duplicates 0.02] [--keep DIR]

1. Writes one hour of the archive (``bench_batch.write_archive``, the archiver's format).
2. Starts a local Druid 33 (``operations.druid_local``, the test configuration) and points the ``druid:``
   settings at it (``parquet_input`` off: the stock Druid reads the JSON lines the batch job writes).
3. The baseline, in the same run: radstack's own rebuild of the hour (``batch.rebuild_job.rebuild``, cold
   Spark, archive → published segments), which also writes the JSON lines (its ``druid_json`` stage).
4. The measured step: :func:`radstack.druid_cluster.reindex.reindex` of the hour, from right after the
   publish until Druid's broker serves every segment of the new version — its stages (Druid's answer
   before, the input, the ``index_parallel`` task, the load, the answer after) — then the same again for a
   second rebuild of the hour (Druid then also overshadows a version it already had).

Prints the seconds, ``reindex_vs_rebuild`` (the Druid step against radstack's rebuild of the same hour in this
run, the baseline), and the peak resident memory of this process tree (the Spark JVM, Spark's Python
workers and this process; Druid's JVMs are not children of it: their RSS is sampled apart). JSON on the
last line. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_batch import DAY, HOUR, MemorySampler, write_archive  # noqa: E402

from batch.rebuild_job import rebuild  # noqa: E402
from operations.druid_local import LocalDruid, ensure_druid_jars  # noqa: E402
from radstack.config import load_settings  # noqa: E402
from radstack.datasources import get_spec  # noqa: E402
from radstack.druid_cluster.reindex import reindex  # noqa: E402
from radstack.storage.deep_storage import open_deep_storage  # noqa: E402
from radstack.storage.metadata import MetadataStore  # noqa: E402
from radstack.time.intervals import Interval  # noqa: E402


def druid_rss_mb(druid: LocalDruid) -> int:
    total = 0
    for proc in druid.procs.values():
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text()
        except OSError:
            continue
        total += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return total // 1024


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=100_000)
    p.add_argument("--duplicates", type=float, default=0.02)
    p.add_argument("--keep", type=Path, default=None, help="work folder to keep (default: a temporary one)")
    a = p.parse_args()
    ensure_druid_jars()
    work = a.keep or Path(tempfile.mkdtemp(prefix="bench-druid-reindex-"))
    home = work / "home"
    (home / "datasources").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "examples" / "ads" / "ads.yaml", home / "datasources" / "ads.yaml")
    hour = Interval(DAY, DAY + HOUR)
    sampler = MemorySampler()
    sampler.start()
    out: dict[str, object] = {"events": a.events}
    with LocalDruid(work / "druid") as druid:
        settings = load_settings(env={"RADSTACK_HOME": str(home)}, overrides={
            "spark": {"shuffle_partitions": 4}, "batch": {"partitions": 4},
            "druid": {"overlord_url": druid.overlord_url, "coordinator_url": druid.coordinator_url,
                      "broker_url": druid.broker_url, "datasources": ["ads"]}})
        records = write_archive(open_deep_storage(settings), a.events, a.duplicates, hours=1)
        out["records"] = records
        spec = get_spec(settings, "ads")
        peak_druid = 0
        with MetadataStore.from_settings(settings) as md:
            storage = open_deep_storage(settings)
            for round_ in (1, 2):
                t = time.monotonic()
                res = rebuild(settings, "ads", hour, force=True, metadata=md, deep_storage=storage)
                rebuild_s = time.monotonic() - t
                t = time.monotonic()
                step = reindex(settings, md, storage, spec, hour, started_by="bench_druid_reindex")
                step_s = time.monotonic() - t
                peak_druid = max(peak_druid, druid_rss_mb(druid))
                after = sum(x.events for x in step.after.values())
                assert after == res.events, (after, res.events)
                print(f"round {round_}: radstack rebuild {rebuild_s:.1f} s ({res.events:,} events, {res.rows:,} rows; "
                      f"druid_json {res.stages.get('druid_json', 0):.2f} s) → Druid serves version "
                      f"{step.druid_version} {step_s:.1f} s after the publish ("
                      + ", ".join(f"{k} {v:.1f} s" for k, v in step.stages.items()) + ")", flush=True)
                out[f"round{round_}"] = {"rebuild_s": round(rebuild_s, 2), "publish_to_druid_served_s": round(step_s, 2),
                                         "reindex_vs_rebuild": round(step_s / rebuild_s, 2),
                                         "druid_json_s": round(res.stages.get("druid_json", 0.0), 2),
                                         "stages": {k: round(v, 2) for k, v in step.stages.items()},
                                         "events": res.events, "rows": res.rows}
    out.update(sampler.stop())
    out["peak_rss_druid_jvms_mb"] = peak_druid
    print("baseline: radstack's own rebuild of the same hour in this run; reindex_vs_rebuild = Druid step / rebuild")
    print(json.dumps(out))
    if a.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
