"""The archiver against a real Kafka broker and real deep storage: exactly N records, each once, in
the right event-hour directory — also across kill -9 and injected faults between file move and commit."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.dataset as pads
import pytest
from confluent_kafka import Producer

from radstack.storage.raw_archive import RAW_PREFIX, hour_dir
from radstack.time.intervals import format_instant
from realtime.archiver import Archiver, ArchiverConfig

pytestmark = pytest.mark.slow

HOUR = 3_600_000
NOW = int(time.time() * 1000)


def _events(n: int, seed: int = 7, late_rate: float = 0.1, bad_rate: float = 0.02) -> list[tuple[bytes | None, bytes, int]]:
    """(key, value, event time) — some late by hours, a few not JSON at all."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        t = NOW - (rnd.randint(1, 5) * HOUR if rnd.random() < late_rate else rnd.randint(0, 60_000))
        if rnd.random() < bad_rate:
            value = b"\xff not json " + str(i).encode()
        else:
            value = json.dumps({"timestamp": format_instant(t), "id": i, "pad": "x" * 120}).encode()
        out.append((str(i).encode(), value, t))
    return out


def _produce(bootstrap: str, topic: str, events: list[tuple[bytes | None, bytes, int]]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for key, value, _ in events:
        p.produce(topic, value=value, key=key, timestamp=NOW)
        p.poll(0)
    assert p.flush(30) == 0


def _read_archive(root: Path, topic: str):  # type: ignore[no-untyped-def]
    base = root / RAW_PREFIX / topic
    files = [str(p) for p in base.rglob("*.parquet")]
    if not files:
        return [], []
    table = pads.dataset(files, format="parquet").to_table()
    return table.to_pylist(), files


def _check_exactly_once(root: Path, topic: str, events: list[tuple[bytes | None, bytes, int]]) -> None:
    rows, files = _read_archive(root, topic)
    coords = [(r["partition"], r["offset"]) for r in rows]
    assert len(coords) == len(set(coords)), "duplicates in the archive"
    assert sorted(r["value"] for r in rows) == sorted(v for _, v, _ in events), "archive != produced"
    # every record sits in the directory of its event hour (Kafka time for the non-JSON ones)
    expected_time = {v: t for _, v, t in events}
    by_file = {}
    for f in files:
        for r in pads.dataset(f, format="parquet").to_table(columns=["value", "event_time_from_kafka"]).to_pylist():
            by_file[r["value"]] = (f, r["event_time_from_kafka"])
    for value, (f, from_kafka) in by_file.items():
        t = NOW if from_kafka else expected_time[value]
        assert hour_dir(topic, t - t % HOUR) in f, (f, t)
        assert from_kafka == value.startswith(b"\xff")


@pytest.fixture
def local_storage(tmp_path: Path):  # type: ignore[no-untyped-def]
    from radstack.storage.deep_storage.local import LocalDeepStorage

    root = tmp_path / "deep"
    return root, LocalDeepStorage(root)


def test_archives_every_record_once_by_event_hour(kafka_bootstrap: str, kafka_topic: str, local_storage) -> None:  # type: ignore[no-untyped-def]
    root, storage = local_storage
    events = _events(3000)
    _produce(kafka_bootstrap, kafka_topic, events)
    cfg = ArchiverConfig(kafka_bootstrap, [kafka_topic], group_id=f"g-{kafka_topic}", max_records=400, max_age_seconds=1)
    stats = Archiver(cfg, storage).run(idle_exit_seconds=8)
    assert stats.records == len(events)
    assert stats.invalid_json == sum(1 for _, v, _ in events if v.startswith(b"\xff"))
    _check_exactly_once(root, kafka_topic, events)
    # a second run of the same group finds nothing new: still exactly N
    stats2 = Archiver(cfg, storage).run(idle_exit_seconds=5)
    assert stats2.records == 0
    _check_exactly_once(root, kafka_topic, events)
    assert not list((root / RAW_PREFIX / "_manifests").rglob("*.json"))


def test_rebalance_commits_the_flushes_in_flight(kafka_bootstrap: str, kafka_topic: str, local_storage) -> None:  # type: ignore[no-untyped-def]
    """A second member joins while records keep coming and the first flushes every 200 records on its
    flusher thread (whether a flush is under way at the revoke is up to timing, not forced): the
    revoke finishes and commits what was started before the partitions move, so the two together
    archive every record exactly once."""
    root, storage = local_storage
    events = _events(8000, seed=11)
    cfg = ArchiverConfig(kafka_bootstrap, [kafka_topic], group_id=f"g-{kafka_topic}", max_records=200,
                         max_age_seconds=1, session_timeout_ms=6000)  # fmt: skip
    results: dict[str, int] = {}
    first = Archiver(cfg, storage)
    t1 = threading.Thread(target=lambda: results.update(a=first.run(idle_exit_seconds=10).records))
    t1.start()
    producer = threading.Thread(  # 8,000 records over ~8 s
        target=lambda: [(_produce(kafka_bootstrap, kafka_topic, events[i : i + 250]), time.sleep(0.25))
                        for i in range(0, len(events), 250)])  # fmt: skip
    producer.start()
    deadline = time.monotonic() + 60
    while first.stats.records < 1000 and time.monotonic() < deadline:
        time.sleep(0.05)
    second = Archiver(cfg, storage)  # joins the group: the first one's partitions are revoked
    t2 = threading.Thread(target=lambda: results.update(b=second.run(idle_exit_seconds=10).records))
    t2.start()
    for t in (producer, t1, t2):
        t.join(120)
    assert results["a"] + results["b"] == len(events), results
    assert results["a"] > 0 and results["b"] > 0  # both members had partitions
    _check_exactly_once(root, kafka_topic, events)
    assert not list((root / RAW_PREFIX / "_manifests").rglob("*.json"))


def _archiver_process(home: Path, bootstrap: str, topic: str, fault: str | None = None) -> subprocess.Popen[bytes]:
    cfg = home / "radstack.yaml"
    cfg.write_text(
        f"home: {home}\nkafka:\n  bootstrap_servers: '{bootstrap}'\n"
        f"archiver:\n  topics: [{topic}]\n  group_id: g-{topic}\n  max_records: 300\n  max_age_seconds: 0.5\n  session_timeout_ms: 6000\n  metrics_port: 0\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("RADSTACK_")}
    env["RADSTACK_CONFIG"] = str(cfg)
    if fault:
        env["RADSTACK_ARCHIVER_FAULT"] = fault
    log = open(home / f"archiver-{time.time_ns()}.log", "wb")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        [sys.executable, "-m", "operations", "archiver", "--idle-exit", "6"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )


@pytest.mark.parametrize("fault", ["after_manifest", "after_move", "after_commit"])
def test_fault_between_steps_then_restart(kafka_bootstrap: str, kafka_topic: str, tmp_path: Path, fault: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    events = _events(1500, seed=11)
    _produce(kafka_bootstrap, kafka_topic, events)
    p = _archiver_process(home, kafka_bootstrap, kafka_topic, fault=fault)
    assert p.wait(120) == 87, "the fault hook should have stopped the first run"
    p = _archiver_process(home, kafka_bootstrap, kafka_topic)
    assert p.wait(180) == 0
    _check_exactly_once(home / "deep-storage", kafka_topic, events)


def test_kill_9_at_random_moments(kafka_bootstrap: str, kafka_topic: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    events = _events(6000, seed=5)
    rnd = random.Random(3)
    chunks = [events[i : i + 1000] for i in range(0, len(events), 1000)]
    for chunk in chunks:
        _produce(kafka_bootstrap, kafka_topic, chunk)
        p = _archiver_process(home, kafka_bootstrap, kafka_topic)
        time.sleep(rnd.uniform(3.0, 9.0))
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(30)
    p = _archiver_process(home, kafka_bootstrap, kafka_topic)
    assert p.wait(180) == 0
    _check_exactly_once(home / "deep-storage", kafka_topic, events)
