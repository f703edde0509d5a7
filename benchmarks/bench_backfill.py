"""``radctl backfill --via local`` of one day of a MINUTE-segment datasource with a little data.

    .venv/bin/python benchmarks/bench_backfill.py [--minutes 1440] [--events 3000] [--data-minutes 3]
                                                   [--repo DIR] [--keep DIR]

1. A fresh ``$RADSTACK_HOME`` with the quickstart's ``ads`` spec (``examples/quickstart/ads.yaml``:
   MINUTE segments), the raw archive written the way the tests write it
   (:func:`tests.fixtures.batch.write_archive`: the archiver's own record builder and layout) —
   ``--events`` impressions spread over the first ``--data-minutes`` minutes of 2026-11-20 — and the
   archiver watermark set past the day (the interval is closed).
2. ``radctl backfill --interval 2026-11-20T00:00Z/PT{minutes}M --datasource ads --via local
   --json`` in a child process (JVM start included), run from ``--repo`` (default: this checkout; pass
   an older checkout to time the code before a change).

Prints the wall time, seconds per chunk, the versions published, the stderr/stdout line counts and a
JSON line.
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
    a = ap.parse_args()

    import orjson

    from radstack.config import load_settings
    from radstack.storage.deep_storage import open_deep_storage
    from radstack.storage.metadata import MetadataStore
    from radstack.time.intervals import format_instant, parse_instant
    from tests.fixtures.batch import set_watermark, write_archive

    work = a.keep or Path(tempfile.mkdtemp(prefix="radstack-bench-backfill-"))
    home = work / "home"
    (home / "datasources").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "examples" / "quickstart" / "ads.yaml", home / "datasources" / "ads.yaml")
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
    storage = open_deep_storage(settings)
    write_archive(storage, "impressions", [orjson.dumps(e) for e in events], per_file=1000)
    with MetadataStore.from_settings(settings) as md:
        set_watermark(md, "impressions", t0 + 2 * 86_400_000)

    env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
    env.update({"RADSTACK_HOME": str(home), "PYTHONPATH": str(a.repo), "COLUMNS": "200"})
    interval = f"{DAY}/PT{a.minutes}M"
    argv = [sys.executable, "-m", "operations", "backfill", "--interval", interval, "--datasource", "ads",
            "--via", "local", "--json"]  # fmt: skip
    print(f"{' '.join(argv[1:])}  (from {a.repo})", flush=True)
    t = time.monotonic()
    proc = subprocess.run(argv, cwd=a.repo, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - t
    (work / "stdout.txt").write_text(proc.stdout)
    (work / "stderr.txt").write_text(proc.stderr)
    if proc.returncode != 0:
        print(proc.stdout[-3000:] + proc.stderr[-3000:], file=sys.stderr)
        return proc.returncode
    chunks = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert len(chunks) == a.minutes, (len(chunks), a.minutes)
    assert {c["status"] for c in chunks} == {"published"}
    events_out = sum(c["batch_events"] for c in chunks)
    assert events_out == a.events, (events_out, a.events)
    versions = {c["version"] for c in chunks}
    table = [ln for ln in proc.stdout.splitlines() if not ln.startswith("{")]
    out = {
        "repo": str(a.repo), "chunks": len(chunks), "events": events_out, "wall_s": round(wall, 1),
        "s_per_chunk": round(wall / len(chunks), 3), "versions": len(versions),
        "stderr_lines": len(proc.stderr.splitlines()), "summary_lines": len(table),
        "data_chunks": sum(1 for c in chunks if c["batch_rows"]),
    }  # fmt: skip
    print(f"{len(chunks)} chunks in {wall:.1f} s ({wall / len(chunks):.3f} s/chunk), {len(versions)} version(s), "
          f"{out['stderr_lines']} stderr lines, {out['summary_lines']} summary lines", flush=True)
    print(json.dumps(out))
    if a.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
