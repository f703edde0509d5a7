"""``radctl`` start-up cost (#51 item 2): the lazy command registry against every command module imported
up front (what ``operations/cli.py`` did before), same machine, same run:

    .venv/bin/python benchmarks/bench_cli.py [--repeat 7]

Each case is a fresh interpreter (as a shell starts ``radctl``); measured per case: wall time and the
CPU time of the child (user + sys, from ``resource.getrusage(RUSAGE_CHILDREN)``), median of
``--repeat``, and the child's peak RSS. The baseline imports every module of
:data:`operations.cli.COMMANDS` before answering ``--help``; ``status`` runs the real command against a
stopped stack (it still reads the configuration, the metadata store and the process table).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LAZY_HELP = "from operations.cli import app; app(['--help'])"
EAGER_HELP = ("import importlib; from operations.cli import COMMANDS, app; "
              "[importlib.import_module(e.target.split(':')[0]) for e in COMMANDS]; app(['--help'])")
STATUS = "from operations.cli import app; app(['status'])"


def run(code: str) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + sys) and peak RSS (KiB) of one fresh interpreter."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_maxrss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    cases = {"help, every command imported (baseline)": EAGER_HELP, "help, lazy registry": LAZY_HELP,
             "status, lazy registry": STATUS}
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    peak: dict[str, int] = {}
    for _ in range(args.repeat):  # interleaved, so a busy moment costs every case alike
        for name, code in cases.items():
            wall, cpu, rss = run(code)
            samples[name].append((wall, cpu))
            peak[name] = rss
    base_cpu = statistics.median(c for _, c in samples["help, every command imported (baseline)"])
    print(f"{'case':42} {'wall s':>7} {'cpu s':>7} {'cpu vs baseline':>16}")
    for name, values in samples.items():
        wall = statistics.median(w for w, _ in values)
        cpu = statistics.median(c for _, c in values)
        print(f"{name:42} {wall:7.2f} {cpu:7.2f} {cpu / base_cpu:15.2f}x")
    print(f"peak RSS of the children (KiB, ru_maxrss of the largest): {max(peak.values()):,}")


if __name__ == "__main__":
    main()
