"""Kafka topics and consumer-group lag through confluent-kafka's AdminClient.

Works the same against the embedded broker and a real cluster (``kafka.bootstrap_servers``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from radstack.config import Settings


def quiet_logger() -> logging.Logger:
    """A logger for librdkafka clients whose connection errors are answered by the caller (not printed)."""
    log = logging.getLogger("radstack.kafka.client")
    if not log.handlers:
        log.addHandler(logging.NullHandler())
        log.propagate = False
    return log


def admin_client(bootstrap_servers: str, **conf: Any) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap_servers, "logger": quiet_logger(), **conf})


def topic_specs(settings: Settings) -> dict[str, int]:
    """``kafka.topics`` from the settings: topic name → partition count."""
    raw = settings.kafka.topics or {}
    return {str(k): int(v) for k, v in raw.items()}


def list_topics(bootstrap_servers: str, timeout: float = 10.0) -> dict[str, int]:
    """Topic → partition count (internal ``__*`` topics left out)."""
    md = admin_client(bootstrap_servers).list_topics(timeout=timeout)
    return {name: len(t.partitions) for name, t in md.topics.items() if not name.startswith("__")}


def ensure_topics(
    bootstrap_servers: str,
    partitions: dict[str, int],
    replication_factor: int = 1,
    config: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> list[str]:
    """Create the topics that do not exist yet; returns the names created. Existing topics are left
    as they are (their partition count is not changed)."""
    admin = admin_client(bootstrap_servers)
    existing = set(admin.list_topics(timeout=timeout).topics)
    new = [
        NewTopic(name, num_partitions=n, replication_factor=replication_factor, config=dict(config or {}))
        for name, n in partitions.items()
        if name not in existing
    ]
    if not new:
        return []
    created: list[str] = []
    for name, fut in admin.create_topics(new, operation_timeout=timeout, request_timeout=timeout).items():
        try:
            fut.result()
            created.append(name)
        except KafkaException as e:
            if e.args and getattr(e.args[0], "name", lambda: "")() == "TOPIC_ALREADY_EXISTS":
                continue
            raise
    return created


def delete_topics(bootstrap_servers: str, names: list[str], timeout: float = 30.0) -> None:
    admin = admin_client(bootstrap_servers)
    for fut in admin.delete_topics(names, operation_timeout=timeout).values():
        fut.result()


@dataclass(frozen=True)
class PartitionLag:
    group: str
    topic: str
    partition: int
    committed: int  # -1 when the group has no committed offset for the partition
    end: int  # the high watermark
    start: int = 0  # the log start offset

    @property
    def lag(self) -> int:
        """Messages the group has not consumed yet (from the log start when it never committed)."""
        return max(0, self.end - (self.committed if self.committed >= 0 else self.start))


@dataclass(frozen=True)
class GroupLag:
    group: str
    state: str
    partitions: list[PartitionLag]

    @property
    def lag(self) -> int:
        return sum(p.lag for p in self.partitions)

    def as_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "state": self.state,
            "lag": self.lag,
            "partitions": [
                {
                    "topic": p.topic,
                    "partition": p.partition,
                    "committed": p.committed,
                    "end": p.end,
                    "lag": p.lag,
                }
                for p in self.partitions
            ],
        }


def consumer_lag(bootstrap_servers: str, timeout: float = 10.0) -> list[GroupLag]:
    """Per consumer group: committed offsets (``list_consumer_group_offsets``) against the high
    watermarks (``list_offsets`` latest) of every partition of the topics it has committed for
    (a partition without a commit counts from its log start)."""
    admin = admin_client(bootstrap_servers)
    listing = admin.list_consumer_groups(request_timeout=timeout).result(timeout=timeout)
    groups = sorted(listing.valid, key=lambda g: g.group_id)
    md = admin.list_topics(timeout=timeout) if groups else None
    out: list[GroupLag] = []
    for g in groups:
        res = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(g.group_id)], request_timeout=timeout
        )
        committed = {
            (tp.topic, tp.partition): int(tp.offset)
            for tp in (res[g.group_id].result(timeout=timeout).topic_partitions or [])
            if not tp.topic.startswith("__")
        }
        keys = set(committed)
        for topic in {t for t, _ in committed}:
            if md is not None and topic in md.topics:
                keys |= {(topic, p) for p in md.topics[topic].partitions}
        ends: dict[tuple[str, int], int] = {}
        starts: dict[tuple[str, int], int] = {}
        if keys:
            for spec, into in ((OffsetSpec.latest, ends), (OffsetSpec.earliest, starts)):
                req = {TopicPartition(t, p): spec() for t, p in keys}
                for tp, fut in admin.list_offsets(req, request_timeout=timeout).items():
                    into[(tp.topic, tp.partition)] = fut.result(timeout=timeout).offset
        parts = [
            PartitionLag(
                g.group_id, t, p, committed.get((t, p), -1), ends.get((t, p), 0), starts.get((t, p), 0)
            )
            for t, p in sorted(keys)
        ]
        state = getattr(g.state, "name", str(g.state))
        out.append(GroupLag(g.group_id, state, parts))
    return out
