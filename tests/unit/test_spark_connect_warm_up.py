"""The warm Spark's warm-up (operations/spark_connect_warm_up.py) when there is nothing to warm: it ends
at once with its reason written down, and ``spark.connect_warm_up: false`` starts nothing. (The warm-up
itself, on a real server: tests/integration/test_warm_spark.py.) Nor is there one on a cluster's master."""

from __future__ import annotations

from pathlib import Path

from operations.spark_connect_warm_up import read_state, start, state_file, warm_up
from radstack.config import load_settings


def test_without_a_server_the_warm_up_ends_failed_and_says_why(tmp_path: Path) -> None:
    settings = load_settings(env={"RADSTACK_HOME": str(tmp_path)})
    state = warm_up(settings)
    assert state["state"] == "failed" and "did not take" in state["reason"]
    assert read_state(settings) == state
    assert state_file(settings).stat().st_mode & 0o077 == 0


def test_switched_off_it_starts_nothing(tmp_path: Path) -> None:
    settings = load_settings(env={"RADSTACK_HOME": str(tmp_path), "RADSTACK_SPARK__CONNECT_WARM_UP": "false"})
    assert start(settings, {}) is None
    assert read_state(settings) is None and not settings.logs_dir.exists()


def test_a_clusters_master_gets_no_warm_up(tmp_path: Path) -> None:
    settings = load_settings(env={"RADSTACK_HOME": str(tmp_path), "RADSTACK_SPARK__MASTER": "spark://127.0.0.1:7077"})
    assert start(settings, {}) is None and read_state(settings) is None
