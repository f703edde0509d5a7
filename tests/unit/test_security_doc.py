"""docs/security.md is tested against the code: each row of its threat model names a test, and every
test it names exists (file and function), so a security claim cannot outlive its proof."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "security.md").read_text()


def _threat_rows() -> list[list[str]]:
    section = DOC.split("## Threat model", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| ") and not ln.startswith("| ---")]
    return [[c.strip() for c in r.strip("|").split(" | ")] for r in rows[1:]]


def test_every_threat_names_a_test() -> None:
    rows = _threat_rows()
    assert len(rows) >= 10
    for row in rows:
        assert len(row) == 4, row
        assert "tests/" in row[3], f"no test proves: {row[0]}"


def test_every_named_test_exists() -> None:
    refs = re.findall(r"`?(tests/[\w/]+\.py)((?:::\w+)?)", DOC)
    assert refs
    for path, func in refs:
        source = (ROOT / path).read_text()
        if func:
            assert re.search(rf"^def {func[2:]}\b", source, re.M), f"{path}{func} does not exist"
    for func in re.findall(r"`::(\w+)`", DOC):  # a bare ::name continues the file named just before it
        assert any(re.search(rf"^def {func}\b", (ROOT / p).read_text(), re.M) for p, _ in refs), func
