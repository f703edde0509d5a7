"""Run Druid's SQL QA suite against radstack and write a per-suite report.

    python -m tests.druid_qa [--suites qaSql,qaWin] [--out build/druid-qa] [--limit N] [--workers 2] [--referee]

Each dataset directory gets a fresh server (a temp home: Druid's framework gives each ``!use`` its own
cluster too, and the directories reuse datasource names). A case passes when:

* ``!ok``: the answer, printed as Druid's quidem prints it (:mod:`tests.druid_qa.render`), equals the
  expected table — compared as a sorted multiset when the statement has no ``ORDER BY`` (quidem's rule);
  when the rows agree as a multiset but not in order and the outermost query has no ``ORDER BY``, the
  order is one SQL leaves undefined, counted apart as ``order_undefined`` (not a failure);
* ``!error``: radstack refuses the statement with a 4xx and Druid's error JSON (the expected text is
  Java exception text; whether it also appears in radstack's message is reported, not required).

A 5xx is always a failure and counted on its own. With ``--referee``, a case that fails is asked of a
local Druid 33 too (:mod:`tests.druid_qa.referee`): the expected tables are Druid master's, and where
Druid 33 answers as radstack does, the case is counted apart as ``as Druid 33`` (listed in
``as-druid33.json``), never recorded as passing.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import json
import os
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from radstack.druid_cluster.submit import OverlordClient
from tests.druid_qa.cases import SUITES, Case, load_cases
from tests.druid_qa.datasets import DatasetLoad, load_dataset
from tests.druid_qa.judging import Answer, Outcome, ask, judge
from tests.druid_qa.referee import Referee

DEFAULT_ROOT = Path(__file__).resolve().parents[3] / "shared" / "druid-qa"


def qa_root() -> Path:
    return Path(os.environ.get("RADSTACK_DRUID_QA") or DEFAULT_ROOT).resolve()


@dataclass
class SuiteReport:
    cases: int = 0
    passed: int = 0
    order_undefined: int = 0
    as_druid33: int = 0  # failed against Druid master's expected table, answered as the local Druid 33 does
    failed: int = 0
    not_run: int = 0
    server_error: int = 0
    ok_cases: int = 0
    ok_passed: int = 0
    error_text_matched: int = 0
    kinds: collections.Counter[str] = field(default_factory=collections.Counter)

    @property
    def pass_rate(self) -> float:
        counted = self.cases
        return (self.passed + self.order_undefined + self.as_druid33) / counted if counted else 0.0


def run_case(http: httpx.Client, url: str, case: Case) -> tuple[Outcome, Answer]:
    answer = ask(http, url, case)
    return judge(case, answer), answer


def _wait_queryable(http: httpx.Client, url: str, datasources: list[str], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    for ds in datasources:
        while time.monotonic() < deadline:
            r = http.post(f"{url}/druid/v2/sql", json={"query": f'SELECT COUNT(*) AS c FROM "{ds}"'})
            if r.status_code == 200 and r.json() and r.json()[0].get("c", 0) > 0:
                break
            time.sleep(0.2)


def run_directory(root: Path, directory: str, cases: list[Case], workers: int,
                  log: Any = print, referee: Referee | None = None) -> tuple[DatasetLoad, list[Outcome]]:
    """A fresh server, the directory's datasets, then its cases; with a ``referee`` (Druid 33), the
    cases radstack fails are asked of it too."""
    from tests.fixtures.server import running_server  # lazy: starts uvicorn and the whole app

    with tempfile.TemporaryDirectory(prefix="druid-qa-") as home, running_server(
            Path(home), {"ingestion": {"local": {"allowed_dirs": [str(root)]}}}) as srv:
        with OverlordClient(srv.url, timeout=120) as client:
            load = load_dataset(client, root, directory)
        with httpx.Client(timeout=120) as http:
            _wait_queryable(http, srv.url, load.datasources)
        log(f"  {directory}: {len(load.datasources)} datasource(s) {load.datasources}"
            + (f", refused {sorted(load.refused)}" if load.refused else ""))
        if not load.datasources:
            return load, [Outcome(c, "not_run", "dataset refused", "; ".join(load.refused.values())[:300])
                          for c in cases]
        with httpx.Client(timeout=120, limits=httpx.Limits(max_connections=workers)) as http, \
                concurrent.futures.ThreadPoolExecutor(workers) as pool:
            done = list(pool.map(lambda c: run_case(http, srv.url, c), cases))
    outcomes = [o for o, _ in done]
    failed = [(i, a) for i, (o, a) in enumerate(done) if o.status == "failed"]
    if referee is not None and failed:
        for k, verdict in referee.review(directory, [(outcomes[i], a) for i, a in failed]):
            outcomes[failed[k][0]] = verdict
        log(f"    Druid 33 answers {sum(o.status == 'as_druid33' for o in outcomes)} of {len(failed)} "
            "failing cases as radstack does")
    return load, outcomes


def summarize(outcomes: list[Outcome]) -> dict[str, SuiteReport]:
    reports: dict[str, SuiteReport] = collections.defaultdict(SuiteReport)
    for o in outcomes:
        r = reports[o.case.suite]
        r.cases += 1
        setattr(r, o.status, getattr(r, o.status) + 1)
        if o.case.kind == "ok":
            r.ok_cases += 1
            r.ok_passed += o.status in ("passed", "order_undefined", "as_druid33")
        elif o.status == "passed" and o.case.error_text and o.case.error_text.splitlines()[0].strip() in o.detail:
            r.error_text_matched += 1
        if o.status in ("failed", "server_error", "not_run"):
            r.kinds[o.kind] += 1
    return dict(reports)


def markdown(reports: dict[str, SuiteReport]) -> str:
    lines = ["| suite | pass / cases | % | order undefined | as Druid 33 | failed | not run | 5xx | `!ok` pass / cases |",
             "|---|---|---|---|---|---|---|---|---|"]
    total = SuiteReport()
    counts = ("cases", "passed", "order_undefined", "as_druid33", "failed", "not_run", "server_error", "ok_cases",
              "ok_passed")
    for suite in [*SUITES, None]:
        r = total if suite is None else reports.get(suite)
        if r is None:
            continue
        name = "**all**" if suite is None else suite
        lines.append(f"| {name} | {r.passed + r.order_undefined + r.as_druid33:,} / {r.cases:,} | "
                     f"{100 * r.pass_rate:.1f} % | {r.order_undefined:,} | {r.as_druid33:,} | {r.failed:,} | "
                     f"{r.not_run:,} | {r.server_error:,} | {r.ok_passed:,} / {r.ok_cases:,} |")
        if suite is not None:
            for k in counts:
                setattr(total, k, getattr(total, k) + getattr(r, k))
    return "\n".join(lines)


def write_report(out: Path, reports: dict[str, SuiteReport], outcomes: list[Outcome],
                 loads: list[DatasetLoad]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    summary = {s: {k: v for k, v in vars(r).items() if k != "kinds"} | {"kinds": dict(r.kinds.most_common())}
               for s, r in reports.items()}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "summary.md").write_text(markdown(reports) + "\n")
    (out / "datasets.json").write_text(json.dumps([vars(ld) for ld in loads], indent=1))
    by_kind: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for o in outcomes:
        if o.status in ("failed", "server_error", "not_run"):
            by_kind[f"{o.case.suite} | {o.status} | {o.kind}"].append(
                {"case": o.case.key, "test": o.case.test_id, "sql": o.case.sql, "detail": o.detail,
                 "expected_error": o.case.error_text or None})
    ordered = dict(sorted(by_kind.items(), key=lambda kv: -len(kv[1])))
    (out / "failures.json").write_text(json.dumps(ordered, indent=1))
    # the cases whose expected table (Druid master's) Druid 33 does not give either: radstack answers as 33
    as_druid33 = [{"case": o.case.key, "test": o.case.test_id, "sql": o.case.sql, "master": o.detail}
                  for o in outcomes if o.status == "as_druid33"]
    (out / "as-druid33.json").write_text(json.dumps(as_druid33, indent=1))


PASSING_FILE = Path(__file__).parent / "passing.json"


def passing_keys(outcomes: list[Outcome]) -> dict[str, list[int]]:
    """The cases that pass, as {case file: [line of each statement]} (a regression baseline that holds
    no text of Druid's files)."""
    out: dict[str, list[int]] = collections.defaultdict(list)
    for o in outcomes:
        if o.status in ("passed", "order_undefined"):
            out[o.case.file].append(o.case.line)
    return {f: sorted(lines) for f, lines in sorted(out.items())}


def in_sample(case: Case, every: int) -> bool:
    """A fixed 1-in-``every`` sample of the cases (the same cases on every run and machine)."""
    return every <= 1 or zlib.crc32(case.key.encode()) % every == 0


def run_cases(root: Path, cases: list[Case], workers: int = 2, log: Any = print,
              referee: Referee | None = None) -> tuple[list[Outcome], list[DatasetLoad]]:
    groups: dict[str, list[Case]] = collections.defaultdict(list)
    for c in cases:
        groups[c.datasets].append(c)
    outcomes: list[Outcome] = []
    loads: list[DatasetLoad] = []
    for directory, group in sorted(groups.items()):
        load, done = run_directory(root, directory, group, workers, log, referee)
        loads.append(load)
        outcomes.extend(done)
    return outcomes, loads


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.druid_qa", description=__doc__.split("\n\n")[0])
    p.add_argument("--suites", default=",".join(SUITES), help="comma-separated suites (default: all)")
    p.add_argument("--out", default="build/druid-qa", help="report directory")
    p.add_argument("--limit", type=int, default=0, help="at most N cases per dataset directory (0: all)")
    p.add_argument("--workers", type=int, default=2, help="concurrent queries")
    p.add_argument("--match", default="", help="only case files whose name contains this")
    p.add_argument("--sample", type=int, default=1, help="a fixed 1-in-N sample of the cases (1: all)")
    p.add_argument("--referee", action="store_true",
                   help="ask a local Druid 33 (operations/druid_local.py) every case radstack fails; where it "
                        "answers as radstack does, count the case apart as 'as Druid 33'")
    p.add_argument("--record", action="store_true",
                   help="write the passing cases to tests/druid_qa/passing.json (the regression baseline)")
    args = p.parse_args(argv)
    root = qa_root()
    if not root.is_dir():
        print(f"Druid's QA suite is not at {root} (set RADSTACK_DRUID_QA)", file=sys.stderr)
        return 2
    cases = [c for c in load_cases(root, tuple(s for s in args.suites.split(",") if s))
             if args.match in c.file and in_sample(c, args.sample)]
    if args.limit:
        per_dir: collections.Counter[str] = collections.Counter()
        kept = []
        for c in cases:
            per_dir[c.datasets] += 1
            if per_dir[c.datasets] <= args.limit:
                kept.append(c)
        cases = kept
    started = time.monotonic()
    print(f"{len(cases):,} cases in {len({c.datasets for c in cases})} dataset directories from {root}")
    with contextlib.ExitStack() as stack:
        referee = stack.enter_context(Referee(root)) if args.referee else None
        outcomes, loads = run_cases(root, cases, args.workers, referee=referee)
    reports = summarize(outcomes)
    write_report(Path(args.out), reports, outcomes, loads)
    if args.record:
        PASSING_FILE.write_text(json.dumps(passing_keys(outcomes), separators=(",", ":")) + "\n")
    print(markdown(reports))
    print(f"{time.monotonic() - started:.0f} s; report in {args.out}/ (summary.md, failures.json)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
