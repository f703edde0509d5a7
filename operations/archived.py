"""Waiting until the archiver holds what Kafka holds: ``radctl backfill --wait`` before a rebuild.

A chunk is *closed* once the archiver's watermark is past it (batch/planning.py), but events replayed
for a past day (``radctl generate ads --start …``) arrive after the watermark passed that day: until the
archiver has consumed them, a rebuild would miss them. So ``--wait`` first waits until the archiver's
consumer group has no lag on the topics of the datasources being rebuilt.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from radstack.config import Settings
from realtime.topics import consumer_lag


def archiver_lag(settings: Settings, topics: Iterable[str]) -> int | None:
    """Records of ``topics`` in Kafka the archiver has not committed yet; None when its consumer group
    does not exist (the archiver never ran) or Kafka does not answer."""
    wanted = set(topics)
    try:
        groups = consumer_lag(settings.kafka.clients_bootstrap, timeout=5)
    except Exception:  # noqa: BLE001 - an unreachable Kafka: nothing to wait for here
        return None
    group = next((g for g in groups if g.group == settings.archiver.group_id), None)
    if group is None:
        return None
    return sum(p.lag for p in group.partitions if p.topic in wanted)


def wait_archived(settings: Settings, topics: Iterable[str], *, timeout_s: float = 120.0, poll_s: float = 1.0,
                  on_poll: Callable[[int], None] | None = None) -> int | None:
    """Poll until the archiver's lag on ``topics`` is 0; the lag left (0: caught up; None: no archiver
    or no Kafka to ask)."""
    topics = list(topics)
    deadline = time.monotonic() + timeout_s
    while True:
        lag = archiver_lag(settings, topics)
        if on_poll is not None and lag is not None:
            on_poll(lag)
        if lag is None or lag == 0 or time.monotonic() >= deadline:
            return lag
        time.sleep(poll_s)
