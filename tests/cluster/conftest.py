"""The multi-node tests (``make test-cluster``; also part of ``make test``). A test that measures a failure
it survived adds a line to :data:`REPORT` (produced, accepted, archived, real-time, rebuilt, lost,
duplicated …), printed at the end of the run, so CI's log carries the counts of every run."""

from __future__ import annotations

from typing import Any

REPORT: dict[str, str] = {}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if REPORT:
        terminalreporter.section("cluster report")
        for name, line in REPORT.items():
            terminalreporter.write_line(f"{name}: {line}")
