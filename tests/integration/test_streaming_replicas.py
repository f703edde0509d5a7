"""Real-time replicas: two ``radctl stream --replica`` processes over the same topic at 5,000 events/s;
one is killed with SIGKILL mid-run. The broker keeps serving the growing answer from the copy that is
furthest ahead — never a smaller count than before (no gap), never more events than were produced (no
double counting) — and ends with every event exactly once."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.streaming import produce_ads, streaming_home

pytestmark = pytest.mark.slow

EVENTS = 100_000
RATE = 5_000


def _start(home: Path, replica: int) -> subprocess.Popen[bytes]:
    from operations.processes import radctl_argv

    env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
    env["RADSTACK_HOME"] = str(home)
    log = open(home / f"stream-replica{replica}.out", "wb")  # noqa: SIM115
    return subprocess.Popen(radctl_argv("stream", "--datasource", "ads", "--replica", str(replica)),
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def _served(svc: Any) -> tuple[int, int | None]:
    from serving.broker.sql.engine import execute

    svc.refresh()
    res = execute(svc, 'SELECT SUM("count") FROM ads') if svc.datasource("ads") else None
    if res is None:
        return 0, None
    try:
        [value] = [v for b in res.batches() for v in b.column(0).to_pylist()]
    finally:
        res.close()
    return int(value or 0), svc._replicas.get("ads")


def test_kill_one_replica_no_gap_no_double_count(kafka_bootstrap: str, ads_topics: dict[str, str],
                                                 tmp_path: Path) -> None:
    from radstack.config import load_settings
    from radstack.storage.deep_storage import open_deep_storage
    from radstack.storage.metadata import MetadataStore
    from radstack.storage.replicas import replica_of, state_key
    from serving.broker.service import BrokerService

    home = streaming_home(tmp_path / "home", kafka_bootstrap, ads_topics, max_offsets=20_000)
    settings = load_settings(env={"RADSTACK_HOME": str(home)})
    metadata = MetadataStore.from_settings(settings)
    svc = BrokerService(settings, metadata, open_deep_storage(settings))
    procs = {r: _start(home, r) for r in (0, 1)}

    def produce() -> None:
        produce_ads(kafka_bootstrap, ads_topics, tmp_path / "gen", events=EVENTS, rate=RATE)

    try:
        deadline = time.monotonic() + 300
        while not all((metadata.get_state(state_key("ads", r)) or {}).get("lastBatchId", -1) >= 0 for r in (0, 1)):
            assert time.monotonic() < deadline, "the replicas did not start"
            assert all(p.poll() is None for p in procs.values()), "a replica exited"
            time.sleep(0.5)
        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        observed: list[tuple[float, int, int | None]] = []
        killed: int | None = None
        t0 = time.monotonic()
        while time.monotonic() - t0 < 240:
            count, chosen = _served(svc)
            observed.append((time.monotonic() - t0, count, chosen))
            if killed is None and count >= EVENTS // 3 and chosen is not None:
                killed = chosen  # kill the replica the broker serves from, mid-run
                _kill(procs[killed])
            if count >= EVENTS and not producer.is_alive():
                break
            time.sleep(0.2)
        producer.join(60)
    finally:
        for p in procs.values():
            _kill(p)
        svc.stop()
    assert killed is not None, observed[-5:]
    counts = [c for _, c, _ in observed]
    assert counts[-1] == EVENTS, observed[-5:]  # every event, exactly once
    assert max(counts) <= EVENTS  # never a double count
    assert all(b >= a for a, b in zip(counts, counts[1:], strict=False)), "the served count went back (a gap)"
    survivor = 1 - killed
    assert observed[-1][2] == survivor  # the broker moved to the replica that went on
    # both replicas wrote their own copies, in their own partition ranges
    segs = metadata.segments("ads", used=None)
    assert {replica_of(s) for s in segs} == {0, 1}
    ids = [s.identifier for s in segs]
    assert len(ids) == len(set(ids))
    metadata.close()
