"""The shell and JSON blocks of docs/*.md, each with the marker on the line above its fence that says how
it is kept true:

* ``<!-- docs-test: tests/…py::test_name -->`` — that test runs the block as written (against a server
  it starts; ``localhost:8888`` becomes the server's address), or the same commands;
* ``<!-- not run: reason -->`` — why no test runs it (an answer shown, a fragment of a spec, a benchmark
  that takes minutes …).

README.md has its own, finer mapping (tests/unit/test_readme.py).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
LANGUAGES = ("bash", "sh", "shell", "console", "json")

_MARKER = re.compile(r"<!--\s*(docs-test|not run):\s*(.*?)\s*-->")


@dataclass(frozen=True)
class Block:
    file: Path
    line: int  # of the opening fence, 1-based
    lang: str
    body: str
    marker: str  # "docs-test" | "not run" | ""
    detail: str  # the test node, or the reason

    @property
    def where(self) -> str:
        return f"{self.file.relative_to(ROOT)}:{self.line}"


def blocks(files: list[Path] | None = None) -> list[Block]:
    out: list[Block] = []
    for path in files if files is not None else sorted(DOCS.glob("*.md")):
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            m = re.match(r"^```(\w+)\s*$", lines[i])
            if not m:
                i += 1
                continue
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            if m.group(1) in LANGUAGES:
                above = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
                mk = _MARKER.search(above)
                out.append(Block(path, i + 1, m.group(1), "\n".join(lines[i + 1:j]) + "\n",
                                 mk.group(1) if mk else "", mk.group(2) if mk else ""))
            i = j + 1
    return out


def run_by(node: str) -> list[Block]:
    """The blocks a docs test says it runs."""
    return [b for b in blocks() if b.marker == "docs-test" and b.detail == node]


def names_a_test(node: str) -> bool:
    """``tests/…py`` or ``tests/…py::test_name`` names a file (and a test function in it) that exists."""
    path, _, name = node.partition("::")
    file = ROOT / path
    if not file.is_file():
        return False
    if not name:
        return True
    tree = ast.parse(file.read_text())
    return any(isinstance(n, ast.FunctionDef) and n.name == name for n in tree.body)

