"""What dispatching the SQL function rules by node (#52) does to translation: before, every one of the
24 function rules ran on every node of the tree; now only the rules that declare a node's class (or an
anonymous call's name) see it (``serving/broker/sql/rule_registry.py:apply_function_rules``). Both ways
translate the same statements (the differential corpus's SQL, seed 20261125) in the same process,
alternating, and must write the same DuckDB SQL.

    .venv/bin/python benchmarks/bench_rule_dispatch.py [--cases 1000] [--repeat 5]

Prints the median seconds to translate every statement both ways, the ratio dispatched / every rule
(the baseline), whether the output is identical, and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from serving.broker.sql import rule_registry  # noqa: E402  (after the path insert above)
from tests.fixtures.druid_corpus import generate  # noqa: E402
from tests.unit.test_rule_registry import _corpus_catalog, _translated  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    catalog = _corpus_catalog()
    cases = [c for c in generate(20261125, n=args.cases) if c.kind == "sql"]
    dispatched_rules = rule_registry._rules_for
    every = tuple(enumerate(rule_registry.FUNCTION_RULES))

    def run(dispatch: bool) -> tuple[float, list[str]]:
        rule_registry._rules_for = dispatched_rules if dispatch else (lambda kind, name: every)  # type: ignore[assignment]
        t0 = time.perf_counter()
        out = [_translated(c, catalog) for c in cases]
        return time.perf_counter() - t0, out

    run(True), run(False)  # warm both (imports, caches)
    times: dict[bool, list[float]] = {True: [], False: []}
    outputs: dict[bool, list[str]] = {}
    for _ in range(args.repeat):
        for mode in (False, True):
            seconds, outputs[mode] = run(mode)
            times[mode].append(seconds)
    every_s, dispatched_s = statistics.median(times[False]), statistics.median(times[True])
    print(json.dumps({
        "statements": len(cases),
        "baseline": "every function rule on every node",
        "every_rule_seconds": round(every_s, 3),
        "dispatched_seconds": round(dispatched_s, 3),
        "dispatched_vs_every_rule": round(dispatched_s / every_s, 3),
        "same_sql": outputs[True] == outputs[False],
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }, indent=1))


if __name__ == "__main__":
    main()
