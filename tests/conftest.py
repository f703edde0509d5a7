"""Shared pytest setup. Fixtures for real services (PostgreSQL, HDFS, S3, Kafka, the server) live in
``tests/fixtures/<service>.py``; every module there is loaded as a plugin."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
pytest_plugins = sorted(
    f"tests.fixtures.{p.stem}" for p in FIXTURES.glob("*.py") if not p.stem.startswith("_")
)

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"

#: the files that take minutes each on 2 cores (longest first, from `--durations` of a whole run), started
#: before the rest so that no worker of `make test`'s first pass is left alone with one of them at the end;
#: the pass runs with `--no-loadscope-reorder`, which keeps this order (xdist's own puts files with many
#: tests first, and these have one or a few)
LONGEST_FIRST = (
    "tests/druid_qa/test_druid_qa.py",
    "tests/integration/test_readme_tour.py",
    "tests/reliability/test_fuzz_api.py",
    "tests/browser/test_new_user.py",
    "tests/browser/test_airflow_ui.py",
    "tests/integration/test_receiver_spool.py",
    "tests/integration/test_archiver.py",
    "tests/integration/test_class_sharing.py",
    "tests/integration/test_streaming_restart.py",
    "tests/integration/test_airflow_rest.py",
    "tests/integration/test_batch_e2e.py",
    "tests/integration/test_warm_spark.py",
    "tests/integration/test_streaming_join.py",
    "tests/integration/test_streaming_replicas.py",
    "tests/integration/test_streaming_e2e.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: the rest keep their order


@pytest.fixture(autouse=True)
def _spark_connect_mode_does_not_leak() -> Iterator[None]:
    """A test that leaves its process in Spark Connect mode fails itself. pyspark marks a process that
    opened a Connect session (``SPARK_CONNECT_MODE_ENABLED``), and every later ``getOrCreate`` in it then
    asks for a Connect server: every local-Spark test after it on the same worker would fail instead."""
    before = os.environ.get(CONNECT_MODE)
    yield
    after = os.environ.get(CONNECT_MODE)
    if after != before:
        if before is None:
            os.environ.pop(CONNECT_MODE, None)
        else:
            os.environ[CONNECT_MODE] = before
        pytest.fail(f"the test left {CONNECT_MODE}={after!r} in its process (open Spark Connect clients in a child "
                    "process, or close them with radstack.pipeline.spark_connect.close_session)")


CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"


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
