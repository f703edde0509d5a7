"""Kafka producers end when their owner is done with them: a stopped streaming job's per-process producer
(dead letters, processed rows) and a closed :class:`realtime.producer.BatchProducer` each kept retrying
a cluster that was gone for the rest of the process (a CI run logged one for 14 minutes after its test's
broker stopped). Checked by librdkafka's own threads in this process."""

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


def _wait_for_threads_to_end(before: int) -> None:
    """Until librdkafka's threads are back to ``before`` (fails after 10 s)."""
    deadline = time.monotonic() + 10
    while _rdkafka_threads() > before:
        assert time.monotonic() < deadline, _rdkafka_threads()
        time.sleep(0.05)


def test_a_forgotten_producer_stops_its_threads() -> None:
    before = _rdkafka_threads()
    bootstrap = "127.0.0.1:1"  # nothing listens: the producer keeps trying, as after a broker stopped
    p = executor_producer(bootstrap)
    assert executor_producer(bootstrap) is p  # one per process and address
    p.poll(0.1)
    assert _rdkafka_threads() > before
    del p
    forget_producer(bootstrap)  # the last reference: freed at once, no collector needed
    _wait_for_threads_to_end(before)
    forget_producer(bootstrap)  # forgetting twice is harmless


def test_a_closed_batch_producer_stops_its_threads() -> None:
    """The receiver's and the generators' producer: its client held its error callback, a cycle the
    collector could not break, so a closed one kept retrying its (stopped) brokers for the life of the
    process (``rdkafka#producer-17`` after tests/cluster/test_cluster.py's cluster went down)."""
    from realtime.producer import BatchProducer

    before = _rdkafka_threads()
    # freed by reference counting alone: the cyclic collector may not run for long (and radstack freezes
    # the startup heap and pauses the collector around large batches)
    gc.disable()
    try:
        p = BatchProducer("127.0.0.1:1", delivery_timeout_ms=1000)
        time.sleep(0.2)
        assert _rdkafka_threads() > before
        p.close(timeout=0)
        p.close(timeout=0)  # closing twice is harmless
        del p
        _wait_for_threads_to_end(before)
    finally:
        gc.enable()
