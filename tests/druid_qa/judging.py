"""Judging one answer: how a case's statement is asked of a server (radstack's or Druid's) and how
the answer is compared with the expected table (quidem's rules, see :mod:`tests.druid_qa.runner`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import httpx
import sqlglot
from sqlglot import exp

from tests.druid_qa.cases import Case
from tests.druid_qa.render import rows_as_cells


@dataclass
class Outcome:
    case: Case
    status: str  # passed | failed | order_undefined | as_druid33 | not_run | server_error
    kind: str = ""  # the failure's kind (grouping in the report)
    detail: str = ""
    http_status: int = 0


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


@dataclass
class Answer:
    """One server's answer to a case: its rows as quidem cells, or its refusal."""
    http_status: int
    names: list[str] = field(default_factory=list)
    cells: list[tuple[str, ...]] | None = None
    message: str = ""  # the error text of a refusal or a transport failure


def ask(http: httpx.Client, url: str, case: Case) -> Answer:
    body = {"query": case.sql, "resultFormat": "array", "header": True, "typesHeader": True,
            "sqlTypesHeader": True, "context": {**case.context, "sqlStringifyArrays": False}}
    try:
        resp = http.post(f"{url}/druid/v2/sql", json=body)
    except httpx.HTTPError as e:
        return Answer(0, message=str(e)[:300])
    if resp.status_code >= 400:
        try:
            err = resp.json()
            message = str(err.get("errorMessage") or err.get("error") or err)
        except ValueError:
            message = resp.text
        return Answer(resp.status_code, message=message[:300])
    payload = resp.json()
    return Answer(resp.status_code, list(payload[0]), rows_as_cells(payload[3:], payload[2]))


def judge(case: Case, answer: Answer, want: list[tuple[str, ...]] | None = None,
          want_columns: int | None = None) -> Outcome:
    """The outcome of ``answer`` against the case's expected table (or against ``want``: another
    server's rows)."""
    status = answer.http_status
    if status == 0:
        return Outcome(case, "server_error", "transport", answer.message)
    if status >= 500:
        return Outcome(case, "server_error", "5xx", answer.message, status)
    if status >= 400:
        if case.kind == "error":
            return Outcome(case, "passed", "", answer.message, status)
        return Outcome(case, "failed", "refused: " + _error_kind(answer.message), answer.message, status)
    if case.kind == "error":
        return Outcome(case, "failed", "answered where Druid refuses", case.error_text[:200], status)
    if want is None:
        assert case.expected is not None
        want, want_columns = [tuple(r) for r in case.expected.rows], len(case.expected.columns)
    names, actual = answer.names, answer.cells or []
    if len(names) != want_columns:
        return Outcome(case, "failed", "column count", f"{len(names)} columns {names} vs {want_columns}", status)
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
