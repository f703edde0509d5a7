"""Shared pytest setup. Fixtures for real services (PostgreSQL, HDFS, S3, Kafka, the server) live in
``tests/fixtures/<service>.py``; every module there is loaded as a plugin."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
pytest_plugins = sorted(
    f"tests.fixtures.{p.stem}" for p in FIXTURES.glob("*.py") if not p.stem.startswith("_")
)

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


@pytest.fixture
def radstack_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh $RADSTACK_HOME for one test, with no config file or RADSTACK_* leaking in."""
    for name in list(os.environ):
        if name.startswith("RADSTACK_"):
            monkeypatch.delenv(name)
    home = tmp_path / "radstack-home"
    home.mkdir()
    monkeypatch.setenv("RADSTACK_HOME", str(home))
    return home


@pytest.fixture
def settings(radstack_home: Path):  # type: ignore[no-untyped-def]
    from radstack.config import load_settings

    return load_settings(env={"RADSTACK_HOME": str(radstack_home)})
