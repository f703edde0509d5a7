"""The archive's completeness watermark, per topic, kept in the metadata store.

``watermark(topic)`` is a Kafka (delivery) time W such that every record the topic received before W
is in deep storage. Per partition it is the Kafka timestamp of the oldest record consumed but not yet
committed (flushed); a partition that is fully caught up (nothing buffered, position at the high
watermark) is complete up to now; otherwise it keeps its last known value. The topic's watermark is the
minimum over its partitions. A batch job for the interval ``[start, end)`` is safe once the watermark
has passed ``end + windowPeriod``: every event delivered up to a window period late is archived.

State keys (:mod:`radstack.storage.raw_archive`, where batch jobs read them): ``archiver.watermark.{topic}`` →
``{"watermark": ms, "partitions": {"0": ms, …}, "updated": ms}`` and ``archiver.stats.{group}``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import TopicPartition

from radstack.storage.metadata import MetadataStore
from radstack.storage.raw_archive import stats_key, watermark_key

SAVE_EVERY_SECONDS = 2.0


class WatermarkTracker:
    def __init__(self, group: str, metadata: MetadataStore | None) -> None:
        self.group = group
        self.metadata = metadata
        self.partitions: dict[tuple[str, int], int] = {}
        self.committed_offsets: dict[tuple[str, int], int] = {}
        self._last_save = 0.0

    def committed(self, key: tuple[str, int], offset: int) -> None:
        self.committed_offsets[key] = offset

    def forget(self, keys: Iterable[tuple[str, int]]) -> None:
        for k in keys:
            self.partitions.pop(k, None)

    def observe(self, consumer: Any, oldest: dict[tuple[str, int], int], stats: Any | None = None) -> None:
        """``oldest``: per partition, the Kafka timestamp of the oldest record consumed but not yet
        committed (partitions with nothing uncommitted are left out)."""
        now_wall = time.time()
        if now_wall - self._last_save < SAVE_EVERY_SECONDS:
            return
        now_ms = int(now_wall * 1000)
        try:
            assignment = consumer.assignment()
        except Exception:  # noqa: BLE001 - a closed consumer has no assignment to report
            return
        for tp in assignment:
            key = (tp.topic, tp.partition)
            if key in oldest:
                self.partitions[key] = oldest[key]
                continue
            try:
                pos = consumer.position([TopicPartition(tp.topic, tp.partition)])[0].offset
                _, high = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=5)
            except Exception:  # noqa: BLE001 - broker hiccup: keep the previous value
                continue
            if (pos >= 0 and pos >= high) or high == 0:
                self.partitions[key] = now_ms
        self.save(stats)

    def topic_watermarks(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for (topic, _), ms in self.partitions.items():
            out[topic] = min(ms, out.get(topic, ms))
        return out

    def save(self, stats: Any | None) -> None:
        self._last_save = time.time()
        if self.metadata is None:
            return
        now_ms = int(self._last_save * 1000)
        for topic in {t for t, _ in self.partitions}:
            key = watermark_key(topic)
            prev = self.metadata.get_state(key) or {}
            parts = dict(prev.get("partitions") or {})
            for (t, p), ms in self.partitions.items():
                if t == topic:
                    parts[str(p)] = max(ms, int(parts.get(str(p), ms)))  # never moves backwards
            self.metadata.put_state(
                key, {"watermark": min(parts.values()), "partitions": parts, "updated": now_ms}
            )
        if stats is not None:
            self.metadata.put_state(stats_key(self.group), {**stats.to_json(), "updated": now_ms})
