"""The reliability suite (``make test-reliability``; also part of ``make test``): hostile input through
every API, load with version swaps, kill -9 loops. Every test adds its figures to :data:`REPORT`, printed
at the end of the run (requests sent, status histogram, kills survived, lost/duplicated) and written to
``test-artifacts/reliability.json``.

``RADSTACK_RELIABILITY_SEED`` picks the seed of the generated corpora (default: fixed, so CI is
repeatable; ``random`` draws one, printed in the report); ``RADSTACK_SOAK=1`` runs the long version."""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from pathlib import Path
from typing import Any

REPORT: dict[str, Any] = {}
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

_raw_seed = os.environ.get("RADSTACK_RELIABILITY_SEED", "20261125")
SEED = random.SystemRandom().randrange(2**31) if _raw_seed == "random" else int(_raw_seed)
SOAK = os.environ.get("RADSTACK_SOAK", "") not in ("", "0", "false")


def statuses(name: str) -> Counter[int]:
    """The status histogram of one part of the suite (created on first use)."""
    part = REPORT.setdefault(name, {"statuses": Counter()})
    return part["statuses"]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not REPORT:
        return
    tr = terminalreporter
    tr.section(f"reliability report (seed {SEED}{', soak' if SOAK else ''})")
    for name, part in REPORT.items():
        line = []
        if part.get("statuses"):
            hist = dict(sorted(part["statuses"].items()))
            line.append(f"requests {sum(hist.values()):,} statuses {hist}")
        line += [f"{k} {v}" for k, v in part.items() if k != "statuses"]
        tr.write_line(f"{name}: " + "; ".join(line))
    ARTIFACTS.mkdir(exist_ok=True)
    out = {"seed": SEED, "soak": SOAK,
           **{k: {kk: (dict(vv) if isinstance(vv, Counter) else vv) for kk, vv in v.items()} for k, v in REPORT.items()}}
    (ARTIFACTS / "reliability.json").write_text(json.dumps(out, indent=2, default=str))
