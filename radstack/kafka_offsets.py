"""The newest offset (high watermark) of every partition of a Kafka topic, for lag: one AdminClient
``list_offsets`` call. Shared by the layers that report lag (the supervisor status)."""

from __future__ import annotations

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

__all__ = ["latest_offsets"]


def latest_offsets(bootstrap_servers: str, topic: str, timeout: float = 5.0) -> dict[int, int]:
    """``{partition: high watermark}``; empty when the topic does not exist. Raises
    ``confluent_kafka.KafkaException`` when the cluster cannot be reached within ``timeout``."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "socket.timeout.ms": int(timeout * 1000)})
    md = admin.list_topics(topic=topic, timeout=timeout)
    meta = md.topics.get(topic)
    if meta is None or meta.error is not None or not meta.partitions:
        return {}
    req = {TopicPartition(topic, p): OffsetSpec.latest() for p in meta.partitions}
    return {tp.partition: int(fut.result(timeout=timeout).offset)
            for tp, fut in admin.list_offsets(req, request_timeout=timeout).items()}
