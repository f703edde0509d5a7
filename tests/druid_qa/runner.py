"""Run Druid's SQL QA suite against radstack and write a per-suite report.

    python -m tests.druid_qa [--suites qaSql,qaWin] [--out build/druid-qa] [--limit N] [--workers 2]

Each dataset directory gets a fresh server (a temp home: Druid's framework gives each ``!use`` its own
cluster too, and the directories reuse datasource names). A case passes when:

* ``!ok``: the answer, printed as Druid's quidem prints it (:mod:`tests.druid_qa.render`), equals the
  expected table — compared as a sorted multiset when the statement has no ``ORDER BY`` (quidem's rule);
  when the rows agree as a multiset but not in order and the outermost query has no ``ORDER BY``, the
  order is one SQL leaves undefined, counted apart as ``order_undefined`` (not a failure);
* ``!error``: radstack refuses the statement with a 4xx and Druid's error JSON (the expected text is
  Java exception text; whether it also appears in radstack's message is reported, not required).

A 5xx is always a failure and counted on its own.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import re
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import sqlglot
from sqlglot import exp

from serving.druid_cluster.submit import OverlordClient
from tests.druid_qa.cases import SUITES, Case, load_cases
from tests.druid_qa.datasets import DatasetLoad, load_dataset
from tests.druid_qa.render import rows_as_cells

DEFAULT_ROOT = Path(__file__).resolve().parents[3] / "shared" / "druid-qa"


def qa_root() -> Path:
    return Path(os.environ.get("RADSTACK_DRUID_QA") or DEFAULT_ROOT).resolve()


@dataclass
class Outcome:
    case: Case
    status: str  # passed | failed | order_undefined | not_run | server_error
    kind: str = ""  # the failure's kind (grouping in the report)
    detail: str = ""
    http_status: int = 0


@dataclass
class SuiteReport:
    cases: int = 0
    passed: int = 0
    order_undefined: int = 0
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
        return (self.passed + self.order_undefined) / counted if counted else 0.0


def _has_outer_order_by(sql: str) -> bool | None:
    try:
        tree = sqlglot.parse_one(sql, read="druid")
    except Exception:  # noqa: BLE001 - sqlglot raises several types; None means "cannot tell"
        return None
    return tree.args.get("order") is not None if isinstance(tree, exp.Query) else None


def _outer_order_columns(sql: str, names: list[str]) -> list[int] | None:
    """The answer's columns the outermost ``ORDER BY`` sorts on, or None when a key is not one of them.

    Rows that tie on every key may come in any order (SQL leaves it undefined, and Druid's own order among
    ties depends on its segments and threads), so two answers whose key columns agree row by row differ
    only in an order the statement does not fix.
    """
    try:
        tree = sqlglot.parse_one(sql, read="druid")
    except Exception:  # noqa: BLE001 - sqlglot raises several types; None means "cannot tell"
        return None
    order = tree.args.get("order") if isinstance(tree, exp.Query) else None
    if order is None:
        return None
    lowered = [n.lower() for n in names]
    columns: list[int] = []
    for key in order.expressions:
        target = key.this if isinstance(key, exp.Ordered) else key
        if isinstance(target, exp.Literal) and target.is_int and 1 <= int(target.name) <= len(names):
            columns.append(int(target.name) - 1)
        elif isinstance(target, exp.Column) and not target.table and target.name.lower() in lowered:
            columns.append(lowered.index(target.name.lower()))
        else:
            return None
    return columns


def _mentions_order_by(sql: str) -> bool:
    return re.search(r"\border\s+by\b", sql, re.IGNORECASE) is not None


def _error_kind(message: str) -> str:
    text = re.sub(r"'[^']*'|\"[^\"]*\"|\[[^\]]*\]|\d+", "…", message)
    return text[:90]


def run_case(http: httpx.Client, url: str, case: Case) -> Outcome:
    body = {"query": case.sql, "resultFormat": "array", "header": True, "typesHeader": True,
            "sqlTypesHeader": True, "context": {**case.context, "sqlStringifyArrays": False}}
    try:
        resp = http.post(f"{url}/druid/v2/sql", json=body)
    except httpx.HTTPError as e:
        return Outcome(case, "server_error", "transport", str(e)[:300])
    status = resp.status_code
    if status >= 500:
        return Outcome(case, "server_error", "5xx", resp.text[:300], status)
    if status >= 400:
        try:
            err = resp.json()
            message = str(err.get("errorMessage") or err.get("error") or err)
        except ValueError:
            message = resp.text
        if case.kind == "error":
            return Outcome(case, "passed", "", message[:300], status)
        return Outcome(case, "failed", "refused: " + _error_kind(message), message[:300], status)
    if case.kind == "error":
        return Outcome(case, "failed", "answered where Druid refuses", case.error_text[:200], status)
    payload = resp.json()
    names, _native, sql_types = payload[0], payload[1], payload[2]
    actual = rows_as_cells(payload[3:], sql_types)
    expected = case.expected
    assert expected is not None
    want = [tuple(r) for r in expected.rows]
    if len(names) != len(expected.columns):
        return Outcome(case, "failed", "column count", f"{names} vs {list(expected.columns)}", status)
    if actual == want:
        return Outcome(case, "passed", http_status=status)
    if sorted(actual) == sorted(want):
        if not _mentions_order_by(case.sql):
            return Outcome(case, "passed", http_status=status)
        if _has_outer_order_by(case.sql) is False:
            return Outcome(case, "order_undefined", "", "", status)
        keys = _outer_order_columns(case.sql, names)
        if keys and [[r[k] for k in keys] for r in actual] == [[r[k] for k in keys] for r in want]:
            return Outcome(case, "order_undefined", "ties", "", status)
        return Outcome(case, "failed", "row order", _diff(actual, want), status)
    kind = "row count" if len(actual) != len(want) else "values"
    return Outcome(case, "failed", kind, _diff(actual, want), status)


def _diff(actual: list[tuple[str, ...]], want: list[tuple[str, ...]]) -> str:
    extra = [r for r in actual if r not in want][:3]
    missing = [r for r in want if r not in actual][:3]
    return f"got {len(actual)} rows, want {len(want)}; unexpected {extra}; missing {missing}"[:600]


def _wait_queryable(http: httpx.Client, url: str, datasources: list[str], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    for ds in datasources:
        while time.monotonic() < deadline:
            r = http.post(f"{url}/druid/v2/sql", json={"query": f'SELECT COUNT(*) AS c FROM "{ds}"'})
            if r.status_code == 200 and r.json() and r.json()[0].get("c", 0) > 0:
                break
            time.sleep(0.2)


def run_directory(root: Path, directory: str, cases: list[Case], workers: int,
                  log: Any = print) -> tuple[DatasetLoad, list[Outcome]]:
    """A fresh server, the directory's datasets, then its cases."""
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
        outcomes: list[Outcome] = []
        with httpx.Client(timeout=120, limits=httpx.Limits(max_connections=workers)) as http, \
                concurrent.futures.ThreadPoolExecutor(workers) as pool:
            outcomes = list(pool.map(lambda c: run_case(http, srv.url, c), cases))
        return load, outcomes


def summarize(outcomes: list[Outcome]) -> dict[str, SuiteReport]:
    reports: dict[str, SuiteReport] = collections.defaultdict(SuiteReport)
    for o in outcomes:
        r = reports[o.case.suite]
        r.cases += 1
        setattr(r, o.status, getattr(r, o.status) + 1)
        if o.case.kind == "ok":
            r.ok_cases += 1
            r.ok_passed += o.status in ("passed", "order_undefined")
        elif o.status == "passed" and o.case.error_text and o.case.error_text.splitlines()[0].strip() in o.detail:
            r.error_text_matched += 1
        if o.status in ("failed", "server_error", "not_run"):
            r.kinds[o.kind] += 1
    return dict(reports)


def markdown(reports: dict[str, SuiteReport]) -> str:
    lines = ["| suite | pass / cases | % | order undefined | failed | not run | 5xx | `!ok` pass / cases |",
             "|---|---|---|---|---|---|---|---|"]
    total = SuiteReport()
    for suite in SUITES:
        r = reports.get(suite)
        if r is None:
            continue
        lines.append(f"| {suite} | {r.passed + r.order_undefined:,} / {r.cases:,} | {100 * r.pass_rate:.1f} % | "
                     f"{r.order_undefined:,} | {r.failed:,} | {r.not_run:,} | {r.server_error:,} | "
                     f"{r.ok_passed:,} / {r.ok_cases:,} |")
        for k in ("cases", "passed", "order_undefined", "failed", "not_run", "server_error", "ok_cases", "ok_passed"):
            setattr(total, k, getattr(total, k) + getattr(r, k))
    lines.append(f"| **all** | {total.passed + total.order_undefined:,} / {total.cases:,} | "
                 f"{100 * total.pass_rate:.1f} % | {total.order_undefined:,} | {total.failed:,} | "
                 f"{total.not_run:,} | {total.server_error:,} | {total.ok_passed:,} / {total.ok_cases:,} |")
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


def run_cases(root: Path, cases: list[Case], workers: int = 2,
              log: Any = print) -> tuple[list[Outcome], list[DatasetLoad]]:
    groups: dict[str, list[Case]] = collections.defaultdict(list)
    for c in cases:
        groups[c.datasets].append(c)
    outcomes: list[Outcome] = []
    loads: list[DatasetLoad] = []
    for directory, group in sorted(groups.items()):
        load, done = run_directory(root, directory, group, workers, log)
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
    outcomes, loads = run_cases(root, cases, args.workers)
    reports = summarize(outcomes)
    write_report(Path(args.out), reports, outcomes, loads)
    if args.record:
        PASSING_FILE.write_text(json.dumps(passing_keys(outcomes), separators=(",", ":")) + "\n")
    print(markdown(reports))
    print(f"{time.monotonic() - started:.0f} s; report in {args.out}/ (summary.md, failures.json)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
