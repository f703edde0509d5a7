"""Reading quidem files (``.iq``, ``.iq.gz``) into cases.

A quidem file is a script: ``!use …&datasets=<dir>`` names the datasets, ``!set k v`` sets a query
context key, then each SQL statement (up to a line ending in ``;``) is followed by output blocks, each
closed by a command: ``!ok`` (the block is the expected mysql-style table), ``!error`` (the block is a
fragment of the expected error) or ``!nativePlan`` (a native plan, not checked here).
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

QTEST_DIR = Path("quidem-ut/src/test/quidem/org.apache.druid.quidem.QTest")
SUITES = ("qaAggFuncs", "qaArray", "qaJsonCols", "qaSql", "qaUnnest", "qaWin", "qaSsb", "qaTpch")
# The standard (native) engine's files. qaSsb and qaTpch have only MSQ files; their SQL is plain
# SELECTs, so they run on the standard engine too.
_ENGINE_SUFFIXES = (".all.iq", ".std.iq", ".all.iq.gz", ".std.iq.gz")
_MSQ_ONLY = ("qaSsb", "qaTpch")
_CONTEXT_KEYS = {"useApproximateCountDistinct", "sqlJoinAlgorithm", "sqlTimeZone", "useApproximateTopN"}
_TESTCASE = re.compile(r"^#\s*TESTCASE:\s*(\S+)\s+TEST_ID:\s*(\S+)")


@dataclass(frozen=True)
class Table:
    """An expected mysql-style table: column names and rows of cell text (stripped)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass
class Case:
    suite: str
    file: str  # relative to the QTest directory
    line: int
    test_id: str
    datasets: str  # the dataset directory, relative to the QA root
    context: dict[str, object]
    sql: str
    kind: str  # "ok" | "error"
    expected: Table | None = None  # for "ok"
    error_text: str = ""  # for "error"
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.file}:{self.line}"


def suite_files(root: Path, suite: str) -> list[Path]:
    folder = root / QTEST_DIR / suite
    if not folder.is_dir():
        return []
    names = sorted(p for p in folder.iterdir() if p.is_file())
    if suite in _MSQ_ONLY:
        return [p for p in names if p.name.endswith((".msq.iq", ".msq.iq.gz"))]
    return [p for p in names if p.name.endswith(_ENGINE_SUFFIXES)]


def _lines(path: Path) -> list[str]:
    if path.name.endswith(".gz"):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return f.read().splitlines()
    return path.read_text(encoding="utf-8").splitlines()


def parse_table(block: list[str]) -> Table | None:
    """The table of an ``!ok`` block, cut by the column widths of its ``+---+`` borders."""
    borders = [i for i, line in enumerate(block) if line.startswith("+-")]
    if len(borders) < 2:
        return None
    border = block[borders[0]]
    cuts = [i for i, ch in enumerate(border) if ch == "+"]

    def cells(line: str) -> tuple[str, ...]:
        return tuple(line[a + 1:b].strip() for a, b in zip(cuts, cuts[1:], strict=False))

    header = cells(block[borders[0] + 1])
    end = borders[2] if len(borders) >= 3 else borders[1]
    body = [cells(line) for line in block[borders[1] + 1:end] if line.startswith("|")] if len(borders) >= 3 else []
    return Table(header, tuple(body))


def parse_file(root: Path, path: Path, suite: str) -> Iterator[Case]:
    lines = _lines(path)
    rel = str(path.relative_to(root / QTEST_DIR))
    datasets = ""
    context: dict[str, object] = {}
    test_id = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        m = _TESTCASE.match(stripped)
        if m:
            test_id = f"{m.group(1)}:{m.group(2)}"
        if not stripped or stripped.startswith("#"):
            i += 1
            continue
        if stripped.startswith("!use"):
            m2 = re.search(r"datasets=([^&\s]+)", stripped)
            datasets = m2.group(1) if m2 else ""
            i += 1
            continue
        if stripped.startswith("!set"):
            parts = stripped.split(None, 2)
            if len(parts) == 3 and parts[1] in _CONTEXT_KEYS:
                value: object = parts[2]
                if parts[2].lower() in ("true", "false"):
                    value = parts[2].lower() == "true"
                context[parts[1]] = value
            i += 1
            continue
        if stripped.startswith("!"):
            i += 1
            continue
        # a statement: up to the line that ends in ';'
        start = i
        sql_lines = []
        while i < len(lines):
            sql_lines.append(lines[i])
            if lines[i].rstrip().endswith(";"):
                break
            i += 1
        i += 1
        sql = "\n".join(sql_lines).rstrip().rstrip(";")
        # output blocks, each closed by a command, until the next statement
        while i < len(lines):
            block = []
            while i < len(lines) and not lines[i].startswith("!"):
                block.append(lines[i])
                i += 1
            if i >= len(lines):
                break
            command = lines[i].strip().split()[0]
            if command == "!ok":
                yield Case(suite, rel, start + 1, test_id, datasets, dict(context), sql, "ok",
                           expected=parse_table(block))
            elif command == "!error":
                text = "\n".join(line for line in block if line.strip())
                yield Case(suite, rel, start + 1, test_id, datasets, dict(context), sql, "error", error_text=text)
            elif command not in ("!nativePlan", "!plan", "!type", "!update", "!convert"):
                break  # a !use/!set: the next statement's setup
            i += 1
            # another command for the same statement follows only after output lines; stop at a new case
            j = i
            while j < len(lines) and not lines[j].strip():
                j += 1
            if j >= len(lines) or lines[j].startswith("#") or lines[j].startswith("!set") or lines[j].startswith("!use"):
                break
            if not _looks_like_output(lines[j]):
                break


def _looks_like_output(line: str) -> bool:
    s = line.lstrip()
    return s.startswith(("{", "+-", "|", "(", "!", "[", '"', "}")) or bool(re.match(r"^[A-Za-z_.]+(Exception|Error)", s))


def load_cases(root: Path, suites: tuple[str, ...] = SUITES) -> list[Case]:
    cases: list[Case] = []
    for suite in suites:
        for path in suite_files(root, suite):
            cases.extend(parse_file(root, path, suite))
    return cases
