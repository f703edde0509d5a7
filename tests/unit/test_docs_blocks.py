"""Every shell and JSON block in docs/ says how it is kept true (tests/docs_blocks.py): a test that runs
it, or the reason none does — and a named test exists."""

from __future__ import annotations

from tests.docs_blocks import blocks, names_a_test


def test_every_block_is_run_by_a_test_or_says_why_not() -> None:
    found = blocks()
    assert len(found) > 30  # the parser sees the docs' blocks
    unmarked = [b.where for b in found if not b.marker]
    assert not unmarked, f"blocks without a <!-- docs-test: … --> or <!-- not run: … --> marker: {unmarked}"
    missing = [f"{b.where} → {b.detail}" for b in found if b.marker == "docs-test" and not names_a_test(b.detail)]
    assert not missing, f"docs-test markers naming no test: {missing}"
    vague = [b.where for b in found if b.marker == "not run" and len(b.detail) < 12]
    assert not vague, f"'not run' needs a reason: {vague}"
