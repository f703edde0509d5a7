"""The batch rebuild on the local multi-node cluster (``radctl cluster up``) against ``local[*]``, same run.

    .venv/bin/python benchmarks/bench_cluster.py [--events 2000000] [--rounds 2]

1. Starts :class:`operations.cluster.LocalCluster` (3 Kafka nodes, HDFS NameNode + 2 DataNodes with
   replication 2, Spark standalone master + 2 workers of 1 core / 2 GB) in a temp home.
2. Writes one day of raw ``ads`` impressions (2 % exact re-sends) into the archive **in HDFS**
   (``bench_batch.write_archive``), archive watermark past the day.
3. Times, alternately, the rebuild of the whole day (one Spark job, one publish into HDFS):
   * ``spark://``: ``deploy/spark/submit-rebuild.py`` → ``spark-submit --master spark://…`` (client
     mode; executors on the two workers, radstack shipped as ``--py-files``);
   * ``local[*]``: ``radctl backfill --via local`` with ``spark.master: local[*]`` over the same HDFS.
   Both are whole commands (JVM start, planning, the job, the publish), the same input and output.

Prints each run's seconds and events/s, the median ratio cluster / local, and the load average (JSON on
the last line). The figures are in docs/deployment.md ("Ran here").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_batch import DAY, HOUR, write_archive  # noqa: E402

from operations.cluster import LocalCluster  # noqa: E402
from operations.spark_standalone import spark_home  # noqa: E402
from radstack.config import load_settings  # noqa: E402
from radstack.storage.deep_storage import open_deep_storage  # noqa: E402
from radstack.storage.metadata import MetadataStore  # noqa: E402
from radstack.storage.raw_archive import watermark_key  # noqa: E402
from radstack.time.intervals import Interval  # noqa: E402


def _env(cluster: LocalCluster, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
    env.update({"RADSTACK_HOME": str(cluster.home), "RADSTACK_CONFIG": str(cluster.settings_file),
                "SPARK_SUBMIT": str(spark_home() / "bin" / "spark-submit"), **extra})  # fmt: skip
    return env


def _timed(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.monotonic()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[:3]} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()

    home = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    cluster = LocalCluster(home=home)
    t0 = time.monotonic()
    cluster.up()
    print(f"cluster up in {time.monotonic() - t0:.1f}s ({cluster.timings})", flush=True)
    try:
        (home / "datasources").mkdir()
        (home / "datasources" / "ads.yaml").write_text((REPO / "examples" / "ads" / "ads.yaml").read_text())
        settings = load_settings(cluster.settings_file, env={"RADSTACK_HOME": str(home)})
        t0 = time.monotonic()
        records = write_archive(open_deep_storage(settings), a.events, 0.02)
        print(f"archive: {records:,} records into HDFS in {time.monotonic() - t0:.1f}s", flush=True)
        with MetadataStore.from_settings(settings) as md:
            wm = DAY + 26 * HOUR
            md.put_state(watermark_key("impressions"), {"watermark": wm, "partitions": {"0": wm}, "updated": wm})
        day = Interval(DAY, DAY + 24 * HOUR).iso()
        runs: dict[str, list[float]] = {"spark://": [], "local[*]": []}
        cmds = {
            "spark://": ([sys.executable, str(REPO / "deploy" / "spark" / "submit-rebuild.py"), "-d", "ads",
                          "-i", day, "--force"], _env(cluster)),
            "local[*]": ([sys.executable, "-m", "operations", "backfill", "--via", "local", "--force", "--json",
                          "--interval", day, "--datasource", "ads"], _env(cluster, RADSTACK_SPARK__MASTER="local[*]")),
        }  # fmt: skip
        for r in range(a.rounds):
            for name in (("spark://", "local[*]") if r % 2 == 0 else ("local[*]", "spark://")):
                s = _timed(*cmds[name])
                runs[name].append(s)
                print(f"round {r + 1} {name:9s} {s:6.1f}s  {a.events / s:,.0f} events/s", flush=True)
        med = {k: statistics.median(v) for k, v in runs.items()}
        out = {
            "events": a.events, "records": records,
            "cluster_s": [round(x, 1) for x in runs["spark://"]], "local_s": [round(x, 1) for x in runs["local[*]"]],
            "ratio_cluster_vs_local": round(med["spark://"] / med["local[*]"], 2),
            "cluster_events_per_s": round(a.events / med["spark://"]),
            "local_events_per_s": round(a.events / med["local[*]"]),
            "loadavg": [round(x, 2) for x in os.getloadavg()],
        }  # fmt: skip
        print(f"rebuild of one day ({a.events:,} events): spark:// median {med['spark://']:.1f}s, local[*] "
              f"{med['local[*]']:.1f}s → ratio {out['ratio_cluster_vs_local']} (baseline: local[*], same run)")
        print(json.dumps(out))
    finally:
        cluster.down()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
