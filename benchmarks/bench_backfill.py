"""``radctl backfill --via local`` as a whole process: a day of a MINUTE-segment datasource with a little
data, or (``--hourly``) what an hourly Airflow task runs.

    .venv/bin/python benchmarks/bench_backfill.py [--minutes 1440] [--events 3000] [--data-minutes 3]
                                                   [--repo DIR] [--keep DIR]
    .venv/bin/python benchmarks/bench_backfill.py --hourly [--events 100000] [--rounds 3]

1. A fresh ``$RADSTACK_HOME`` with the quickstart's ``ads`` spec (``examples/quickstart/ads.yaml``:
   MINUTE segments; with ``--hourly`` the ``ads`` example's HOUR segments and minute rollup, 2 % of
   the events re-sent and ``--minutes``/``--data-minutes`` 60), the raw archive written the way the
   tests write it
   (:func:`tests.fixtures.batch.write_archive`: the archiver's own record builder and layout) —
   ``--events`` impressions spread over the first ``--data-minutes`` minutes of 2026-11-20 — and the
   archiver watermark set past the day (the interval is closed).
2. ``radctl backfill --interval 2026-11-20T00:00Z/PT{minutes}M --datasource ads --via local
   --json`` in a child process (JVM start included), run from ``--repo`` (default: this checkout; pass
   an older checkout to time the code before a change; ``--vs-repo DIR`` runs DIR's beside this
   checkout's in each round, alternating which goes first, and prints ``vs_repo_ratio``: best wall time
   here / best there, on the same archive in the same run).

Prints the wall time, seconds per chunk, the versions published, the stderr/stdout line counts and a
JSON line. ``--rounds N`` runs the backfill N times (``--force``: the same hour again) and reports each;
with it, where the wall time goes: the interpreter and radstack's imports (``python -c 'import
operations.cli'`` timed alone, the baseline), the rebuild's own steps (``stages`` of the JSON result:
``batch.rebuild_job.STAGES``) and the rest (planning, the before/after summaries, stopping the JVM).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DAY = "2026-11-20T00:00:00.000Z"
MINUTE = 60_000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=int, default=1440, help="chunks to rebuild (MINUTE segments)")
    ap.add_argument("--events", type=int, default=3000)
    ap.add_argument("--data-minutes", type=int, default=3)
    ap.add_argument("--repo", type=Path, default=REPO, help="checkout whose radctl runs the backfill")
    ap.add_argument("--keep", type=Path, default=None, help="work directory to keep (default: a temp dir)")
    ap.add_argument("--hourly", action="store_true",
                    help="one hour of the ads example (HOUR segments), 100k events unless --events says otherwise")
    ap.add_argument("--rounds", type=int, default=1, help="backfills to run, one after the other (--force)")
    ap.add_argument("--vs-full-jit", action="store_true",
                    help="each round also runs the backfill with batch.quick_jit_max_records 0 (C2 too), alternating")
    ap.add_argument("--warm", action="store_true",
                    help="start the warm Spark (radctl up --only spark-connect) first: the backfills run on it; each "
                         "round also runs one with spark.connect_server false (its own Spark), alternating; prints vs_cold")
    ap.add_argument("--vs-repo", type=Path, default=None,
                    help="each round also runs the backfill from this checkout (the baseline), alternating which goes first")
    a = ap.parse_args()
    if a.hourly:
        a.minutes, a.data_minutes = 60, 60
        a.events = a.events if a.events != ap.get_default("events") else 100_000

    import orjson

    from radstack.config import load_settings
    from radstack.storage.deep_storage import open_deep_storage
    from radstack.storage.metadata import MetadataStore
    from radstack.time.intervals import format_instant, parse_instant
    from tests.fixtures.batch import set_watermark, write_archive

    work = a.keep or Path(tempfile.mkdtemp(prefix="radstack-bench-backfill-"))
    home = work / "home"
    (home / "datasources").mkdir(parents=True, exist_ok=True)
    spec_file = REPO / "examples" / ("ads" if a.hourly else "quickstart") / "ads.yaml"
    shutil.copy(spec_file, home / "datasources" / "ads.yaml")
    settings = load_settings(env={"RADSTACK_HOME": str(home)})
    t0 = parse_instant(DAY)
    rng = random.Random(7)
    events = [
        {
            "timestamp": format_instant(t0 + rng.randrange(0, a.data_minutes * MINUTE)),
            "impression_id": f"imp-{i}",
            "publisher": rng.choice(["bieberfever.com", "ultratrimfast.com"]),
            "advertiser": rng.choice(["google.com", "yahoo.com"]),
            "gender": rng.choice(["Male", "Female"]),
            "city": rng.choice(["Berlin", "Paris", "Tokyo"]),
            "price": round(rng.uniform(0.1, 2.0), 4),
        }
        for i in range(a.events)
    ]
    values = [orjson.dumps(e) for e in events]
    if a.hourly:  # 2 % exact re-sends, and the files of four 25k-record flushes
        values += [values[rng.randrange(len(values))] for _ in range(len(values) // 50)]
    storage = open_deep_storage(settings)
    write_archive(storage, "impressions", values, per_file=25_000 if a.hourly else 1000)
    with MetadataStore.from_settings(settings) as md:
        set_watermark(md, "impressions", t0 + 2 * 86_400_000)

    env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
    env.update({"RADSTACK_HOME": str(home), "PYTHONPATH": str(a.repo), "COLUMNS": "200"})
    interval = f"{DAY}/PT{a.minutes}M"
    argv = [sys.executable, "-m", "operations", "backfill", "--interval", interval, "--datasource", "ads",
            "--via", "local", "--json"]  # fmt: skip
    print(f"{' '.join(argv[1:])}  (from {a.repo})", flush=True)
    t = time.monotonic()
    # the command's own imports: `radctl` loads a command's module only when it runs (operations.cli.COMMANDS)
    subprocess.run([sys.executable, "-c", "import operations.cli, operations.commands.backfill"], cwd=a.repo, env=env,
                   check=True)  # fmt: skip
    imports_s = time.monotonic() - t
    rounds: list[dict[str, Any]] = []
    full_jit: list[dict[str, Any]] = []
    vs: list[dict[str, Any]] = []
    cold: list[dict[str, Any]] = []
    warm_start_s = 0.0
    warm_up: dict[str, Any] = {}
    if a.warm:
        t = time.monotonic()
        subprocess.run([sys.executable, "-m", "operations", "up", "--only", "spark-connect"], cwd=a.repo, env=env,
                       check=True, capture_output=True)  # fmt: skip
        warm_start_s = time.monotonic() - t
        print(f"the warm Spark started in {warm_start_s:.1f} s (not in any round's time)", flush=True)
        warm_up = _wait_warm_up(home)
        print(f"its warm-up (operations/spark_connect_warm_up.py): {warm_up} (not in any round's time)", flush=True)
    server_mem: dict[str, float] = {}
    try:
        status, chunks, proc = _rounds(a, argv, env, work, imports_s, rounds, full_jit, vs, cold)
        if a.warm:
            server_mem = _server_memory(home)
    finally:
        if a.warm:
            subprocess.run([sys.executable, "-m", "operations", "down"], cwd=a.repo, env=env, check=False,
                           capture_output=True)  # fmt: skip
    if status:
        return status
    events_out = sum(c["batch_events"] for c in chunks)
    versions = {c["version"] for c in chunks}
    table = [ln for ln in proc.stdout.splitlines() if not ln.startswith("{")]
    best = min(rounds, key=lambda x: x["wall_s"])
    out = {
        "repo": str(a.repo), "chunks": len(chunks), "events": events_out, "wall_s": best["wall_s"],
        "s_per_chunk": round(best["wall_s"] / len(chunks), 3), "versions": len(versions),
        "stderr_lines": len(proc.stderr.splitlines()), "summary_lines": len(table),
        "data_chunks": sum(1 for c in chunks if c["batch_rows"]), "python_imports_s": round(imports_s, 2),
        "rounds": rounds,
        **({"hourly_seconds": best["wall_s"]} if a.hourly else {}),
        **({"full_jit_wall_s": min(x["wall_s"] for x in full_jit), "full_jit_rounds": full_jit,
            "vs_full_jit": round(best["wall_s"] / min(x["wall_s"] for x in full_jit), 2)} if full_jit else {}),
        **({"vs_repo": str(a.vs_repo), "vs_wall_s": min(x["wall_s"] for x in vs), "vs_rounds": vs,
            "vs_repo_ratio": round(best["wall_s"] / min(x["wall_s"] for x in vs), 3)} if vs else {}),
        **({"warm_start_s": round(warm_start_s, 1), "warm_up": warm_up, "first_round_s": rounds[0]["wall_s"],
            "cold_wall_s": min(x["wall_s"] for x in cold), "cold_rounds": cold,
            "vs_cold": round(best["wall_s"] / min(x["wall_s"] for x in cold), 3), **server_mem} if cold else {}),
    }  # fmt: skip
    print(f"{len(chunks)} chunks in {best['wall_s']:.1f} s (best of {a.rounds}), {len(versions)} version(s), "
          f"{out['stderr_lines']} stderr lines, {out['summary_lines']} summary lines", flush=True)
    print(json.dumps(out))
    if a.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _server_memory(home: Path) -> dict[str, float]:
    """The warm Spark's peak RSS (its JVM's VmHWM) and the RSS of its Python workers now, in MB."""
    pid = json.loads((home / "run" / "spark-connect.pid").read_text())["pid"]

    def status(p: int, key: str) -> float:
        for ln in Path(f"/proc/{p}/status").read_text().splitlines():
            if ln.startswith(key + ":"):
                return int(ln.split()[1]) / 1024
        return 0.0

    ps = subprocess.run(["ps", "-eo", "pid=,ppid=,args="], capture_output=True, text=True, check=True).stdout
    procs = [(int(a), int(b), c) for a, b, c in (ln.split(None, 2) for ln in ps.splitlines() if ln.strip())]
    tree = {pid}
    for _ in range(3):
        tree |= {p for p, pp, _ in procs if pp in tree}
    workers = [p for p, _, args in procs if p in tree and p != pid and "pyspark" in args]
    out = {"server_peak_rss_mb": round(status(pid, "VmHWM")), "server_python_workers": len(workers),
           "server_python_workers_rss_mb": round(sum(status(p, "VmRSS") for p in workers))}  # fmt: skip
    print(f"the warm Spark: JVM peak RSS {out['server_peak_rss_mb']} MB, {len(workers)} Python processes "
          f"{out['server_python_workers_rss_mb']} MB", flush=True)
    return out


def _wait_warm_up(home: Path, timeout: float = 300.0) -> dict[str, Any]:
    """The warm-up's outcome once it has ended (as a scheduled job comes well after ``radctl up``)."""
    state_path = home / "run" / "spark-connect-warm-up.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = json.loads(state_path.read_text())
        except (OSError, ValueError):
            return {"state": "none"}
        if state.get("state") != "running":
            return dict(state)
        time.sleep(0.5)
    return {"state": "still running"}


def _rounds(a: argparse.Namespace, argv: list[str], env: dict[str, str], work: Path, imports_s: float,
            rounds: list[dict[str, Any]], full_jit: list[dict[str, Any]], vs: list[dict[str, Any]],
            cold: list[dict[str, Any]]) -> tuple[int, list[dict[str, Any]], Any]:
    """Run the rounds; every backfill's result goes into the list of its kind. Returns the exit status
    (non-zero: a backfill failed), the last backfill's chunk lines and its process."""
    chunks: list[dict[str, Any]] = []
    proc: Any = None
    for r in range(a.rounds):
        runs = [("", rounds), *([("full JIT", full_jit)] if a.vs_full_jit else []),
                *([("vs " + str(a.vs_repo), vs)] if a.vs_repo else []), *([("own Spark", cold)] if a.warm else [])]
        for label, sink in runs if r % 2 == 0 else runs[::-1]:
            extra = {"RADSTACK_BATCH__QUICK_JIT_MAX_RECORDS": "0"} if sink is full_jit else {}
            if sink is cold:
                extra["RADSTACK_SPARK__CONNECT_SERVER"] = "false"
            repo = a.vs_repo if sink is vs else a.repo
            if sink is vs:
                extra["PYTHONPATH"] = str(repo)
            t = time.monotonic()
            proc = subprocess.run([*argv, *(["--force"] if rounds or full_jit or vs or cold else [])], cwd=repo,
                                  env={**env, **extra}, capture_output=True, text=True, check=False)  # fmt: skip
            wall = time.monotonic() - t
            (work / "stdout.txt").write_text(proc.stdout)
            (work / "stderr.txt").write_text(proc.stderr)
            if proc.returncode != 0:
                print(proc.stdout[-3000:] + proc.stderr[-3000:], file=sys.stderr)
                return proc.returncode, chunks, proc
            chunks = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
            assert len(chunks) == a.minutes // (60 if a.hourly else 1), (len(chunks), a.minutes)
            assert {c["status"] for c in chunks} == {"published"}
            events_out = sum(c["batch_events"] for c in chunks)
            assert events_out == a.events, (events_out, a.events)
            stages: dict[str, float] = {}
            for c in {c["group"]: c for c in chunks}.values():  # one rebuild per group
                for k, v in c.get("stages", {}).items():
                    stages[k] = stages.get(k, 0.0) + v
            spark = sorted({c.get("spark", "") for c in chunks})
            sink.append({"wall_s": round(wall, 2), "stages": {k: round(v, 2) for k, v in stages.items()},
                         "rest_s": round(wall - imports_s - sum(stages.values()), 2), "spark": spark})
            print(f"round {r + 1}{' (' + label + ')' if label else ''}: {len(chunks)} chunk(s), {events_out:,} events "
                  f"in {wall:.1f} s: python + imports {imports_s:.1f} s, "
                  + ", ".join(f"{k} {v:.2f} s" for k, v in stages.items()) + f", the rest {sink[-1]['rest_s']:.1f} s"
                  + f" ({'/'.join(spark)} Spark)", flush=True)  # fmt: skip
    return 0, chunks, proc


if __name__ == "__main__":
    sys.exit(main())
