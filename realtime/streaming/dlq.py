"""Dead letters: invalid events go to ``<topic>.dlq`` (or ``processing.deadLetterTopic``) with the
original bytes as the value and the reason and source coordinates as headers
(``radstack.reason``, ``radstack.topic``, ``radstack.partition``, ``radstack.offset``).

Produced with confluent-kafka (acks=all, idempotent) from the executor task that found them
(:mod:`realtime.streaming.micro_batch`); each Python worker keeps one producer per bootstrap address.
Delivery is at least once: a batch replayed after a crash between the dead-letter write and the
publish writes its dead letters again.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from confluent_kafka import Producer

from radstack.pipeline.parse import OFFSET_COLUMN, PARTITION_COLUMN, RAW_COLUMN, REASON_COLUMN, TOPIC_COLUMN
from radstack.spec import DatasourceSpec

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["deliver_all", "dlq_topic", "dlq_topics", "executor_producer", "forget_producer", "produce_dead_letters"]

_producers: dict[str, Any] = {}


def dlq_topic(spec: DatasourceSpec, topic: str) -> str:
    return spec.processing.dead_letter_topic or f"{topic}.dlq"


def dlq_topics(spec: DatasourceSpec, topics: list[str]) -> list[str]:
    return sorted({dlq_topic(spec, t) for t in topics})


def executor_producer(bootstrap_servers: str) -> Any:
    """The idempotent producer this Python worker keeps per bootstrap address (dead letters, processed rows)."""

    p = _producers.get(bootstrap_servers)
    if p is None:
        p = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5, "log_level": 3})
        _producers[bootstrap_servers] = p
    return p


def forget_producer(bootstrap_servers: str) -> None:
    """Drop this process's producer for ``bootstrap_servers`` (a streaming job on it stopped): every
    message of it was flushed by :func:`deliver_all`, and the last reference gone ends its threads and
    connections, which otherwise retried a cluster that may be gone for the life of the process."""
    _producers.pop(bootstrap_servers, None)


def deliver_all(bootstrap_servers: str, messages: Iterable[tuple[str, bytes, list[Any] | None]], what: str,
                timeout: float = 60.0) -> int:
    """Produce every ``(topic, value, headers)`` with this worker's idempotent producer and wait for all
    of them; returns how many, raises if any was not delivered (the micro-batch then fails and is
    retried)."""
    p = executor_producer(bootstrap_servers)
    errors: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    n = 0
    for topic, value, headers in messages:
        while True:
            try:
                p.produce(topic, value=value, headers=headers, on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: serve delivery reports, then try again
                p.poll(0.1)
        n += 1
    left = p.flush(timeout)
    if left or errors:
        raise RuntimeError(f"{what} not delivered: {left} pending, errors {errors[:3]}")
    return n


def produce_dead_letters(dead: pa.Table, spec: DatasourceSpec, bootstrap_servers: str, timeout: float = 60.0) -> int:
    """Produce the invalid rows of a micro-batch (``__reason``, ``__raw`` and the Kafka coordinates)
    to their dead-letter topics; returns how many were delivered, raises if any was not."""
    cols = [dead.column(c).to_pylist() for c in (REASON_COLUMN, RAW_COLUMN, TOPIC_COLUMN, PARTITION_COLUMN, OFFSET_COLUMN)]

    def messages() -> Iterator[tuple[str, bytes, list[Any] | None]]:
        for reason, raw, topic, part, off in zip(*cols, strict=True):
            headers = [
                ("radstack.reason", str(reason).encode()),
                ("radstack.topic", None if topic is None else str(topic).encode()),
                ("radstack.partition", None if part is None else str(part).encode()),
                ("radstack.offset", None if off is None else str(off).encode()),
            ]
            yield dlq_topic(spec, topic or "events"), raw or b"", headers

    return deliver_all(bootstrap_servers, messages(), "dead letters", timeout)
