"""The streaming job's per-process producer (dead letters, processed rows) ends with the job: a stopped
job's producer kept retrying a cluster that was gone for the rest of the process (a CI run logged one
for 14 minutes after its test's broker stopped)."""

from __future__ import annotations

import gc
import time
from pathlib import Path

from realtime.streaming.dlq import executor_producer, forget_producer


def _rdkafka_threads() -> int:
    """librdkafka's own threads in this process (``rdk:main``, ``rdk:broker…``)."""
    n = 0
    for task in Path("/proc/self/task").iterdir():
        try:
            n += (task / "comm").read_text().startswith("rdk:")
        except OSError:
            continue
    return n


def test_a_forgotten_producer_stops_its_threads() -> None:
    before = _rdkafka_threads()
    bootstrap = "127.0.0.1:1"  # nothing listens: the producer keeps trying, as after a broker stopped
    p = executor_producer(bootstrap)
    assert executor_producer(bootstrap) is p  # one per process and address
    p.poll(0.1)
    assert _rdkafka_threads() > before
    del p
    forget_producer(bootstrap)
    gc.collect()
    deadline = time.monotonic() + 10
    while _rdkafka_threads() > before:
        assert time.monotonic() < deadline, _rdkafka_threads()
        time.sleep(0.05)
    forget_producer(bootstrap)  # forgetting twice is harmless
