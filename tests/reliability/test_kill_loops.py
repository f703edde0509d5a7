"""kill -9 loops during production: the archiver 20 times, the streaming job 5 times. Afterwards the
archive holds every produced record exactly once, and the real-time totals equal the produced truth."""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.streaming import produce_ads, segment_rows, streaming_home
from tests.integration.test_archiver import (
    _archiver_process,
    _check_exactly_once,
    _events,
    _produce,
    _read_archive,
)
from tests.integration.test_streaming_restart import _kill, _start, _wait_state
from tests.reliability.conftest import REPORT, SEED, SOAK

pytestmark = [pytest.mark.slow, pytest.mark.reliability, pytest.mark.alone]

ARCHIVER_KILLS = 40 if SOAK else 20
STREAMING_KILLS = 10 if SOAK else 5


def test_archiver_killed_20_times(kafka_bootstrap: str, kafka_topic: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    events = _events(200 * ARCHIVER_KILLS, seed=SEED % 1000)
    rnd = random.Random(SEED)
    chunks = [events[i: i + 200] for i in range(0, len(events), 200)]
    start = time.monotonic()
    for chunk in chunks:
        _produce(kafka_bootstrap, kafka_topic, chunk)  # production goes on between the kills
        p = _archiver_process(home, kafka_bootstrap, kafka_topic)
        time.sleep(rnd.uniform(1.5, 5.0))
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(30)
    p = _archiver_process(home, kafka_bootstrap, kafka_topic)
    assert p.wait(180) == 0
    rows, _ = _read_archive(home / "deep-storage", kafka_topic)
    coords = [(r["partition"], r["offset"]) for r in rows]
    REPORT.setdefault("archiver kill -9", {}).update(
        kills=len(chunks), produced=len(events), archived=len(rows),
        lost=len({v for _, v, _ in events} - {r["value"] for r in rows}), duplicated=len(coords) - len(set(coords)),
        seconds=round(time.monotonic() - start, 1))
    _check_exactly_once(home / "deep-storage", kafka_topic, events)


def test_streaming_job_killed_5_times(kafka_bootstrap: str, ads_topics: dict[str, str], tmp_path: Path) -> None:
    from radstack.config import load_settings
    from radstack.storage.metadata import MetadataStore

    home = streaming_home(tmp_path / "home", kafka_bootstrap, ads_topics, max_offsets=300)
    settings = load_settings(env={"RADSTACK_HOME": str(home)})
    metadata = MetadataStore.from_settings(settings)
    per_round = 1500
    produced = 0
    start = time.monotonic()
    last = -1
    for i in range(STREAMING_KILLS):
        produce_ads(kafka_bootstrap, ads_topics, tmp_path / f"gen{i}", events=per_round, seed=SEED + i,
                    start_ms=1_795_000_000_000 + i * 60_000)  # event time moves on, as production does
        produced += per_round
        p = _start(home, {})
        try:
            st: dict[str, Any] = _wait_state(metadata, lambda s, last=last: s.get("lastBatchId", -1) >= last + 2, p, 300)
            last = st["lastBatchId"]
        finally:
            _kill(p)
    p = _start(home, {}, "--available-now")
    assert p.wait(300) == 0
    total = sum(r["count"] for r in segment_rows(metadata, "ads"))
    st = metadata.get_state("streaming.ads")
    ids = [s.identifier for s in metadata.segments("ads", used=None)]
    REPORT.setdefault("streaming kill -9", {}).update(
        kills=STREAMING_KILLS, produced=produced, realtime_total=total, processed=st["counters"]["processed"],
        lost=max(0, produced - total), duplicated=max(0, total - produced), seconds=round(time.monotonic() - start, 1))
    assert total == produced and st["counters"]["processed"] == produced
    assert len(ids) == len(set(ids))
    metadata.close()
