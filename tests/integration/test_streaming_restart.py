"""Kill -9 of the streaming job (``radctl stream``) mid-run, and a crash right after a publish but
before Spark's commit: after restarts, no event is lost or counted twice."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.streaming import produce_ads, segment_rows, streaming_home

pytestmark = pytest.mark.slow


def _start(home: Path, env_extra: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    from operations.processes import radctl_argv

    env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
    env.update(RADSTACK_HOME=str(home), **env_extra)
    log = open(home / f"stream-{time.monotonic_ns()}.out", "wb")  # noqa: SIM115
    return subprocess.Popen(
        radctl_argv("stream", "--datasource", "ads", *args),
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def _wait_state(metadata: Any, pred: Any, proc: subprocess.Popen[bytes], timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = metadata.get_state("streaming.ads") or {}
        if pred(st):
            return st
        if proc.poll() is not None:
            break
        time.sleep(0.3)
    raise AssertionError(f"state never matched (exit code {proc.poll()}): {metadata.get_state('streaming.ads')}")


def test_kill_and_crash_then_restart_is_exact(kafka_bootstrap: str, ads_topics: dict[str, str], tmp_path: Path) -> None:
    from radstack.config import load_settings
    from radstack.storage.metadata import MetadataStore

    home = streaming_home(tmp_path / "home", kafka_bootstrap, ads_topics, max_offsets=400)
    n = 4000
    produce_ads(kafka_bootstrap, ads_topics, tmp_path / "gen", events=n)
    settings = load_settings(env={"RADSTACK_HOME": str(home)})
    metadata = MetadataStore.from_settings(settings)

    # 1. crash right after publishing batch 1, before Spark commits it: the replay must be skipped
    p1 = _start(home, {"RADSTACK_STREAM_CRASH_AFTER_PUBLISH": "1"})
    assert p1.wait(300) == 86, (home / "logs").glob("*")
    st = metadata.get_state("streaming.ads")
    assert st["lastBatchId"] == 1
    # 2. restart; kill -9 the whole process group in the middle of the run
    p2 = _start(home, {})
    try:
        st = _wait_state(metadata, lambda s: s.get("lastBatchId", -1) >= 4, p2, 300)
    finally:
        _kill(p2)
    assert sum(r["count"] for r in segment_rows(metadata, "ads")) < n
    # 3. restart until everything Kafka holds is processed
    p3 = _start(home, {}, "--available-now")
    assert p3.wait(300) == 0
    rows = segment_rows(metadata, "ads")
    assert sum(r["count"] for r in rows) == n
    st = metadata.get_state("streaming.ads")
    assert st["counters"]["processed"] == n
    assert sum(sum(v.values()) for v in st["offsets"].values()) == n
    # the replayed batch 1 was skipped, not published again: partition numbers are unique per version
    ids = [s.identifier for s in metadata.segments("ads", used=None)]
    assert len(ids) == len(set(ids))
    log = "".join(p.read_text(errors="replace") for p in home.glob("stream-*.out"))
    assert "already published: skipped (replay)" in log
    metadata.close()
