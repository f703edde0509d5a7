"""`make test`'s first pass starts the longest files first (tests/conftest.py): each one named must exist,
or a rename would quietly send it back to the end of the pass."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import LONGEST_FIRST

ROOT = Path(__file__).resolve().parents[2]


def test_every_file_started_first_exists() -> None:
    missing = [p for p in LONGEST_FIRST if not (ROOT / p).is_file()]
    assert not missing, missing
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
