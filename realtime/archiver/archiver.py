"""The archiver: a Kafka consumer group that copies every raw record into deep storage, exactly once.

Per assigned partition, records are collected column-wise in offset order. A buffer is flushed when it
reaches ``max_records`` or ``max_bytes``, when it is older than ``max_age_seconds``, when the Kafka
timestamp crosses an hour boundary, on rebalance and on shutdown. A flush:

1. builds the Arrow table (original bytes + Kafka coordinates + event time, vectorised);
2. splits it by **event** hour and writes one Parquet file per hour to a local temp dir;
3. writes the flush manifest to deep storage (the list of data keys it is about to create);
4. moves each file into place (deep storage ``put_file`` is atomic: temp name, then rename);
5. commits ``last + 1`` to Kafka, synchronously;
6. deletes the manifest, updates the completeness watermark.

Steps 1-2 run on :data:`FLUSHER_THREADS` flusher threads (DuckDB, Arrow and Parquet release the GIL)
while the consumer reads on; steps 3-6 run on the consumer's thread, flush after flush in the order they
were started (whichever thread finished first), so a
partition's commits never overtake each other. At most ``MAX_PENDING_FLUSHES`` wait for that; a
rebalance finishes them all before the partitions go, a lost partition drops its own (nothing was
committed for them), and the watermark counts their records as not yet archived.

A crash between any two steps is repaired on the next assignment by :mod:`.recovery`.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, KafkaException, Message, TopicPartition

from radstack.metrics import record_archive
from radstack.storage.deep_storage.base import DeepStorage, DeepStorageError
from radstack.storage.metadata import MetadataStore
from radstack.storage.raw_archive import HOUR_MS, manifest_key
from radstack.time.clock import now_millis
from realtime.archiver.config import ArchiverConfig
from realtime.archiver.records import ColumnBuffer, to_table, write_hour_files
from realtime.archiver.recovery import delete_committed_manifests, recover_partition
from realtime.archiver.watermark import WatermarkTracker

log = logging.getLogger(__name__)
#: how often a running archiver re-reads the datasource catalog for new topics
TOPICS_REFRESH_SECONDS = 10.0

FAULT_ENV = "RADSTACK_ARCHIVER_FAULT"
"""Fault injection for tests: ``after_manifest``, ``after_move`` (files in place, offsets not yet
committed), ``after_commit`` (committed, manifest not yet deleted) make the process exit at once."""


_ERROR = Message.error  # the descriptors: see realtime.archiver.records on methodcaller
_TOPIC = Message.topic
_PARTITION = Message.partition


def _record_or_raise(m: Any) -> bool:
    """True for a record; False for the end-of-partition notice; raises a consumer error."""
    err = m.error()
    if err is None:
        return True
    if err.code() == KafkaError._PARTITION_EOF:
        return False
    raise KafkaException(err)


FETCH_SETTINGS: dict[str, Any] = {
    "fetch.wait.max.ms": 100,
    "queued.max.messages.kbytes": 262_144,
    "fetch.max.bytes": 52_428_800,
    # librdkafka postpones a partition's next fetch by this much once its local queue is full (default
    # 1000 ms): reading a backlog, the consumer then emptied the queue and waited ~0.9 s every second
    # (measured: bare consumer 185-225 k events/s with the default, 860-920 k with 10-100 ms)
    "fetch.queue.backoff.ms": 100,
}
"""The archiver consumer's fetch settings (``benchmarks/bench_archiver.py`` gives its bare consumer the
same, so the two are compared like with like)."""


def _hour(m: Any) -> int | None:
    """The Kafka-time hour of a record (None when it has no timestamp)."""
    tt, ts = m.timestamp()
    return ts // HOUR_MS if tt != 0 and ts >= 0 else None


MAX_PENDING_FLUSHES = 2
"""Flushes whose files the flusher threads may be building while the consumer reads on."""

FLUSHER_THREADS = 2
"""Threads building flushes' files: two, so that flushes that come together (every partition's buffer full
at once) are built side by side (docs/benchmarks.md, "Archiver")."""


@dataclass
class _Ready:
    """A flush's files, built on the flusher thread: ``(key, local path)`` per event hour."""

    files: list[tuple[str, Path]]
    records: int
    invalid_json: int
    from_kafka: int


@dataclass
class _Pending:
    key: tuple[str, int]
    first: int
    last: int
    min_kafka_ts: int | None
    future: Future[_Ready]


def _prepare(buf: ColumnBuffer, field_name: str, fmt: str, tmp: Path, compression: str, parsed: bool) -> _Ready:
    """Build a buffer's archive table and write one local Parquet file per event hour (the flusher
    thread's part of a flush: DuckDB, Arrow and Parquet release the GIL, so it runs beside the consume
    loop on another core)."""
    table = to_table(buf, timestamp_field=field_name, timestamp_format=fmt, parsed=parsed)
    files = write_hour_files(buf, table, tmp, compression)
    valid = pc.sum(table.column("valid_json").cast(pa.int64())).as_py() or 0
    from_kafka = pc.sum(table.column("event_time_from_kafka").cast(pa.int64())).as_py() or 0
    return _Ready(files, table.num_rows, table.num_rows - valid, from_kafka)


def _remove_local_files(future: Future[_Ready]) -> None:
    """Done-callback of a dropped flush: its local files are not going anywhere."""
    if future.cancelled() or future.exception() is not None:
        return
    for _, local in future.result().files:
        local.unlink(missing_ok=True)


def _transient(e: Exception) -> bool:
    """Deep-storage errors may pass; a Kafka error only when librdkafka says a retry can succeed (not,
    say, a commit refused because the partition moved to another member)."""
    if not isinstance(e, KafkaException):
        return True
    err = e.args[0] if e.args else None
    return isinstance(err, KafkaError) and (err.retriable() or err.code() in _RETRIABLE_COMMIT)


def _membership_lost(e: KafkaException) -> bool:
    err = e.args[0] if e.args else None
    return isinstance(err, KafkaError) and err.code() in (
        KafkaError.UNKNOWN_MEMBER_ID, KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.FENCED_INSTANCE_ID, KafkaError._STATE)


# _WAIT_COORD: librdkafka's own "no coordinator yet" while a new one is found after a broker died
_RETRIABLE_COMMIT = {KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT,
                     KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR,
                     KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError._WAIT_COORD}  # fmt: skip


@dataclass
class ArchiverStats:
    records: int = 0
    bytes: int = 0
    files: int = 0
    flushes: int = 0
    invalid_json: int = 0
    event_time_from_kafka: int = 0
    recovered_flushes: int = 0
    undone_flushes: int = 0
    files_per_hour: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Archiver:
    def __init__(
        self,
        config: ArchiverConfig,
        deep_storage: DeepStorage,
        metadata: MetadataStore | None = None,
        *,
        fault: str | None = None,
        topics_source: Callable[[], tuple[list[str], dict[str, tuple[str, str]]]] | None = None,
        topics_refresh_seconds: float = TOPICS_REFRESH_SECONDS,
    ) -> None:
        self.config = config
        self.topics_source = topics_source
        self.topics_refresh_seconds = topics_refresh_seconds
        self._topics_checked = time.monotonic()
        self.deep_storage = deep_storage
        self.metadata = metadata
        self.fault = fault if fault is not None else os.environ.get(FAULT_ENV) or None
        self.stats = ArchiverStats()
        self.buffers: dict[tuple[str, int], ColumnBuffer] = {}
        self._buffer_started: dict[tuple[str, int], float] = {}
        self._buffer_hour: dict[tuple[str, int], int] = {}
        self._tmp = Path(tempfile.mkdtemp(prefix="radstack-archiver-"))
        self._flusher = ThreadPoolExecutor(max_workers=FLUSHER_THREADS, thread_name_prefix="radstack-archiver-flush")
        self._pending: deque[_Pending] = deque()
        self.watermarks = WatermarkTracker(config.group_id, metadata)
        self._stop = threading.Event()
        self._assigned = False
        self._fenced = False
        conf = {
            "bootstrap.servers": config.bootstrap_servers,
            "group.id": config.group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "session.timeout.ms": config.session_timeout_ms,
            **FETCH_SETTINGS,
        }
        conf.update(config.consumer_conf)
        self.consumer = Consumer(conf)
        self._subscribe(config.topics)

    def _subscribe(self, topics: list[str]) -> None:
        if not topics:  # nothing to read yet: refresh_topics subscribes once a datasource names a topic
            return
        self.consumer.subscribe(list(topics), on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_lost)  # fmt: skip

    def refresh_topics(self) -> list[str]:
        """Re-read ``topics_source``; a topic it names that is not archived yet (a datasource added
        while the archiver runs: a supervisor posted to the API) is subscribed to, from its earliest
        offset. Topics are never dropped: an archive that stops is a loss nobody asked for. Returns
        the topics added."""
        self._topics_checked = time.monotonic()
        if self.topics_source is None:
            return []
        try:
            topics, stamps = self.topics_source()
        except Exception:  # noqa: BLE001 - the catalog is re-read next time; archiving goes on
            log.warning("archiver: could not re-read the datasource catalog", exc_info=True)
            return []
        for topic, stamp in stamps.items():
            self.config.timestamp_fields.setdefault(topic, stamp)
        added = sorted(set(topics) - set(self.config.topics))
        if added:
            self.config.topics = [*self.config.topics, *added]
            log.info("archiver: now also archiving %s", ", ".join(added))
            self._subscribe(self.config.topics)
        return added

    # ---- rebalance callbacks -----------------------------------------------------------------
    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        committed = {(tp.topic, tp.partition): tp.offset for tp in consumer.committed(partitions, timeout=30)}
        to_commit: list[TopicPartition] = []
        for tp in partitions:
            c = committed.get((tp.topic, tp.partition), OFFSET_INVALID)
            res = recover_partition(self.deep_storage, tp.topic, tp.partition, c if c >= 0 else None)
            self.stats.recovered_flushes += res.completed
            self.stats.undone_flushes += res.undone
            if res.commit_offset is not None:
                to_commit.append(TopicPartition(tp.topic, tp.partition, res.commit_offset))
            if res.resume_offset is not None:
                tp.offset = res.resume_offset
        if to_commit:
            self._retry(lambda: consumer.commit(offsets=to_commit, asynchronous=False), "commit after recovery")
            for tp in to_commit:
                delete_committed_manifests(self.deep_storage, tp.topic, tp.partition, tp.offset)
        consumer.assign(partitions)
        self._fenced = False
        self._assigned = bool(partitions)
        log.info("archiver assigned %s", [(tp.topic, tp.partition, tp.offset) for tp in partitions])

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._flush((tp.topic, tp.partition))
        self._finish_ready(wait=True)  # committed before the partitions go
        self._assigned = False
        self.watermarks.forget([(tp.topic, tp.partition) for tp in partitions])

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # The partitions already belong to someone else: drop the buffers, do not commit. Their
        # records are re-read by the new owner (nothing was committed for them).
        keys = [(tp.topic, tp.partition) for tp in partitions]
        self._drop_buffers(keys)
        self._drop_pending(set(keys))

    def _drop_buffers(self, keys: list[tuple[str, int]]) -> None:
        for key in keys:
            self.buffers.pop(key, None)
            self._buffer_started.pop(key, None)
            self._buffer_hour.pop(key, None)

    # ---- main loop ---------------------------------------------------------------------------
    def stop(self) -> None:
        self._stop.set()

    def run(
        self,
        *,
        idle_exit_seconds: float | None = None,
        on_progress: Callable[[ArchiverStats], None] | None = None,
    ) -> ArchiverStats:
        """Consume until :meth:`stop` (or ``idle_exit_seconds`` without a record once partitions are
        assigned), then flush all."""
        last_record = time.monotonic()
        try:
            while not self._stop.is_set():
                if not self.config.topics:  # no datasource reads a topic yet: wait for one
                    self._stop.wait(min(1.0, self.topics_refresh_seconds))
                    self.refresh_topics()
                    continue
                got = self._consume_batch()
                if got:
                    last_record = time.monotonic()
                self._flush_due()
                self._finish_ready()
                self.watermarks.observe(self.consumer, self._oldest_uncommitted(), self.stats)
                if on_progress is not None:
                    on_progress(self.stats)
                if time.monotonic() - self._topics_checked >= self.topics_refresh_seconds:
                    self.refresh_topics()
                if not self._assigned:
                    last_record = time.monotonic()  # idle time counts only once partitions are ours
                elif idle_exit_seconds is not None and time.monotonic() - last_record > idle_exit_seconds:
                    break
            self.flush_all()
        finally:
            self.close()
        return self.stats

    def _consume_batch(self) -> int:
        """Consume up to 10,000 records and buffer them, with Python's cyclic garbage collector paused:
        Message objects are tracked by it, so a batch alive across the collections its own allocation
        triggers is walked again and again and pushed into the older generations, whose collections
        then walk every record still alive. Nothing here makes a reference cycle; the collector runs
        again from the next allocation after the batch is gone."""
        enabled = gc.isenabled()
        gc.disable()
        try:
            msgs = self.consumer.consume(num_messages=10_000, timeout=0.5)
            if msgs:
                self._collect(msgs)
            return len(msgs)
        finally:
            if enabled:
                gc.enable()

    def _collect(self, msgs: list[Any]) -> None:
        if self._fenced:  # records fetched before the rebalance: read again after it, from the commits
            return
        if any(map(_ERROR, msgs)):
            msgs = [m for m in msgs if _record_or_raise(m)]
            if not msgs:
                return
        # Split by partition with C-level iteration (consume() hands out runs of one partition), making
        # no tuple per record: objects that outlive a collection of the youngest generation bring on
        # the full collections that cost the most (see ColumnBuffer).
        topics = list(map(_TOPIC, msgs))
        parts = list(map(_PARTITION, msgs))
        n = len(msgs)
        if topics.count(topics[0]) == n and parts.count(parts[0]) == n:
            groups = {(topics[0], parts[0]): msgs}
        else:
            groups = {}
            i = 0
            for key, run in groupby(zip(topics, parts, strict=True)):
                j = i + sum(1 for _ in run)
                groups.setdefault(key, []).extend(msgs[i:j])
                i = j
        for key, group in groups.items():
            self._add(key, group)

    def _add(self, key: tuple[str, int], group: list[Any]) -> None:
        """Append one partition's records, flushing first wherever Kafka time enters a new hour."""
        first_h, last_h = _hour(group[0]), _hour(group[-1])
        current = self._buffer_hour.get(key)
        if first_h == last_h and (current is None or first_h is None or first_h == current):
            self._extend(key, group, first_h)
        else:  # an hour boundary inside the batch (rare): split it there
            i = 0
            while i < len(group):
                h = _hour(group[i])
                j = i + 1
                while j < len(group) and _hour(group[j]) in (h, None):
                    j += 1
                cur = self._buffer_hour.get(key)
                if cur is not None and h is not None and h != cur:
                    self._flush(key)  # close the hour's files
                self._extend(key, group[i:j], h)
                i = j
        buf = self.buffers.get(key)
        if buf is not None and (len(buf) >= self.config.max_records or buf.nbytes >= self.config.max_bytes):
            self._flush(key)

    def _extend(self, key: tuple[str, int], msgs: list[Any], hour: int | None) -> None:
        buf = self.buffers.get(key)
        if buf is None:
            buf = self.buffers[key] = ColumnBuffer(key[0], key[1])
            self._buffer_started[key] = time.monotonic()
        if hour is not None and key not in self._buffer_hour:
            self._buffer_hour[key] = hour
        buf.extend(msgs)

    def _flush_due(self) -> None:
        now = time.monotonic()
        for key in [k for k, t in self._buffer_started.items() if now - t >= self.config.max_age_seconds]:
            self._flush(key)

    def flush_all(self) -> None:
        for key in list(self.buffers):
            self._flush(key)
        self._finish_ready(wait=True)

    # ---- one flush -----------------------------------------------------------------------------
    def _flush(self, key: tuple[str, int], *, wait: bool = False) -> None:
        """Hand the partition's buffer to the flusher thread, which builds its files (:func:`_prepare`);
        the rest of the flush (:meth:`_finish`) runs here, in the order the flushes were started, once
        their files are ready. ``wait``: finish every started flush before returning."""
        buf = self.buffers.pop(key, None)
        self._buffer_started.pop(key, None)
        self._buffer_hour.pop(key, None)
        if buf is not None and len(buf) > 0:
            topic = key[0]
            field_name, fmt = self.config.timestamp_of(topic)
            future = self._flusher.submit(_prepare, buf, field_name, fmt, self._tmp, self.config.compression,
                                          self.config.parsed_columns)
            self._pending.append(_Pending(key, buf.first_offset, buf.last_offset, buf.min_kafka_ts, future))
        self._finish_ready(wait=wait)

    def _finish_ready(self, *, wait: bool = False) -> None:
        """Finish the started flushes whose files are ready, oldest first; all of them with ``wait``,
        and always enough that at most ``MAX_PENDING_FLUSHES`` stay in flight (memory)."""
        while self._pending and (wait or len(self._pending) > MAX_PENDING_FLUSHES or self._pending[0].future.done()):
            self._finish(self._pending.popleft())

    def _drop_pending(self, keys: set[tuple[str, int]] | None = None) -> None:
        """Forget started flushes (of ``keys``; all with None) without committing them: their records
        are read again from the committed offsets. Their local files go when they are written."""
        keep: deque[_Pending] = deque()
        for p in self._pending:
            if keys is None or p.key in keys:
                p.future.add_done_callback(_remove_local_files)
            else:
                keep.append(p)
        self._pending = keep

    def _finish(self, p: _Pending) -> None:
        """Manifest → files into place → commit → manifest deleted (see the module's docstring)."""
        ready = p.future.result()
        topic, partition = p.key
        first, last, files = p.first, p.last, ready.files
        manifest = {
            "topic": topic,
            "partition": partition,
            "first": first,
            "last": last,
            "records": ready.records,
            "files": [k for k, _ in files],
            "created": now_millis(),
        }
        mkey = manifest_key(topic, partition, first, last)
        self._retry(lambda: self.deep_storage.put_bytes(json.dumps(manifest).encode(), mkey), mkey)
        self._maybe_fail("after_manifest")
        size = 0
        for k, local in files:
            size += local.stat().st_size
            self._retry(lambda local=local, k=k: self.deep_storage.put_file(local, k), k)
            local.unlink()
        self._maybe_fail("after_move")
        offsets = [TopicPartition(topic, partition, last + 1)]
        try:
            self._retry(lambda: self.consumer.commit(offsets=offsets, asynchronous=False), f"commit {p.key}")
        except KafkaException as e:
            if not _membership_lost(e):
                raise
            # The group moved on without this member (a broker holding the group died and the session
            # ran out): every partition is gone. The manifest stays; whoever is assigned the partition
            # next (this process after it rejoins, or another) finishes this flush in recovery, and
            # every buffered record is read again from the committed offsets.
            log.warning("archiver: commit of %s[%d] %d..%d refused (%s); left to recovery, buffers dropped",
                        topic, partition, first, last, e)  # fmt: skip
            self._drop_buffers(list(self.buffers))
            self._drop_pending()
            self._fenced = True  # until the rebalance re-assigns from the committed offsets (after recovery)
            return
        self._maybe_fail("after_commit")
        self.deep_storage.delete(mkey)
        s = self.stats
        s.records += ready.records
        s.bytes += size
        s.files += len(files)
        s.flushes += 1
        s.invalid_json += ready.invalid_json
        s.event_time_from_kafka += ready.from_kafka
        for k, _ in files:
            hour_key = k.rsplit("/", 1)[0]
            s.files_per_hour[hour_key] = s.files_per_hour.get(hour_key, 0) + 1
        self.watermarks.committed(p.key, last + 1)
        record_archive(topic, ready.records, size, self.watermarks.topic_watermarks().get(topic))

    def _oldest_uncommitted(self) -> dict[tuple[str, int], int]:
        """Per partition, the oldest Kafka timestamp of the records consumed but not committed: in a
        buffer or in a flush under way (for the watermark)."""
        out: dict[tuple[str, int], int] = {}
        for key, ms in [(p.key, p.min_kafka_ts) for p in self._pending] + [
            (k, b.min_kafka_ts) for k, b in self.buffers.items()
        ]:
            if ms is not None:
                out[key] = min(ms, out.get(key, ms))
        return out

    def _retry(self, step: Callable[[], Any], what: str) -> None:
        """Run one flush step, again after a transient failure (deep storage or Kafka unreachable) with a
        growing pause, for ``retry_seconds`` at most. Every step is idempotent: a file goes to a temp name
        then onto its key, and committing the same offset twice is harmless."""
        deadline = time.monotonic() + self.config.retry_seconds
        pause = 0.2
        while True:
            try:
                step()
                return
            except (DeepStorageError, OSError, KafkaException) as e:
                if time.monotonic() + pause > deadline or not _transient(e):
                    raise
                log.warning("archiver: %s failed (%s); retrying in %.1fs", what, e, pause)
                time.sleep(pause)
                pause = min(pause * 2, 5.0)

    def _maybe_fail(self, point: str) -> None:
        if self.fault == point:
            log.error("fault injection: exiting at %s", point)
            os._exit(87)

    def close(self) -> None:
        try:
            self.consumer.close()
        finally:
            self._flusher.shutdown(wait=True, cancel_futures=True)
            shutil.rmtree(self._tmp, ignore_errors=True)
            self.watermarks.save(self.stats)
