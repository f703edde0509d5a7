"""What the receiver holds while it runs: the producer (spool off) or the spool and its drainer (spool
on), and the caches of the topics it may write and that exist in Kafka."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from radstack.config import Settings
from radstack.datasources import load_catalog
from radstack.spec import SpecError
from realtime.producer import BatchProducer
from realtime.spool import Spool
from realtime.spool_drainer import SpoolDrainer
from realtime.streaming.dlq import dlq_topic

#: how long a topic seen in Kafka, and the allow-list read from the specs, are trusted
TOPIC_CACHE_SECONDS = 30.0


@dataclass
class ReceiverState:
    settings: Settings
    producer: BatchProducer | None = None
    spool: Spool | None = None
    drainer: SpoolDrainer | None = None
    #: whether :meth:`open` made the producer (then :meth:`close` closes it)
    owns_producer: bool = False
    _known_until: dict[str, float] = field(default_factory=dict)
    _allowed: tuple[float, frozenset[str], frozenset[str]] = (0.0, frozenset(), frozenset())

    @property
    def kafka_conf(self) -> dict[str, int]:
        return {"message.max.bytes": max(1_000_000, int(self.settings.receiver.max_event_bytes) + 4096)}

    def open(self) -> None:
        spool_conf = self.settings.receiver.spool
        bootstrap = self.settings.kafka.clients_bootstrap
        if spool_conf.enabled:
            self.spool = Spool(self.settings.spool_dir, spool_conf.max_bytes, spool_conf.segment_bytes,
                               spool_conf.fsync, spool_conf.fsync_interval_ms)
            self.drainer = SpoolDrainer(self.spool, bootstrap, **self.kafka_conf).start()
        elif self.producer is None:
            self.owns_producer = True
            self.producer = BatchProducer(bootstrap, delivery_timeout_ms=int(self.settings.receiver.delivery_timeout_ms),
                                          **self.kafka_conf)

    async def close(self) -> None:
        if self.drainer is not None and self.spool is not None:
            await asyncio.to_thread(self.drainer.stop, 5.0)
            self.spool.close()
        if self.owns_producer and self.producer is not None:
            self.producer.close(timeout=5)

    def topic_known(self, exists: Callable[[str], bool], topic: str) -> bool:
        """Whether Kafka has ``topic`` (or will create it: ``kafka.auto_create_topics``)."""
        now = time.monotonic()
        if self._known_until.get(topic, 0.0) > now:
            return True
        if exists(topic):
            self._known_until[topic] = now + TOPIC_CACHE_SECONDS
            return True
        return bool(self.settings.kafka.auto_create_topics)

    def allowed(self) -> tuple[frozenset[str], frozenset[str]]:
        """(writable topics, dead-letter topics), re-read from the datasource specs every 30 s."""
        at, allowed, dead = self._allowed
        if time.monotonic() - at < TOPIC_CACHE_SECONDS and allowed:
            return allowed, dead
        try:
            specs = list(load_catalog(self.settings).values())
        except (OSError, SpecError):
            specs = []
        spec_topics = {t for spec in specs for t in spec.processing.topics}
        dead = frozenset(dlq_topic(spec, t) for spec in specs for t in spec.processing.topics)
        allowed = frozenset(self.settings.receiver.topics or (set(self.settings.kafka.topics) | spec_topics))
        self._allowed = (time.monotonic(), allowed, dead)
        return allowed, dead
