"""The spool's drainer: one thread that produces the spooled events to Kafka in spool order, exactly once.

- Every message carries the header ``radstack.spool`` = spool id (16 bytes) + sequence number (8 bytes,
  big-endian). The producer is idempotent with no delivery timeout, so within one producer session
  Kafka keeps each message once and in order per partition, however long the broker is away.
- A sequence number is *committed* when it and every number before it are acknowledged (or
  dead-lettered). ``checkpoint.json`` keeps the committed number and, per partition, the offset from
  which later messages of this spool can sit.
- After a crash (or a producer that had to be replaced), the numbers above the checkpoint may or may
  not be in Kafka. The drainer reads those partitions from the checkpoint's offsets to their end,
  collects the numbers it finds in the headers, and produces only the others.
- An event Kafka refuses for good (too large for the topic, topic gone) goes to
  ``dead-letter/<topic>.ndjson`` in the spool directory with the reason, and counts as committed.

Callbacks are served by the drainer's own ``poll`` calls, so its bookkeeping needs no lock; request
handlers wait for their last number through :meth:`SpoolDrainer.wait_committed`.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import orjson
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from realtime.producer import PRODUCER_DEFAULTS, TOO_LARGE_CODES, KafkaUnavailable
from realtime.spool import Checkpoint, Entry, Spool, dead_letter_dir

log = logging.getLogger(__name__)

FAULT_ENV = "RADSTACK_SPOOL_FAULT"
"""Fault injection for tests: ``exit_after_delivered:N`` ends the process at once (exit code 87) when the
N-th acknowledgement arrives, before the checkpoint records it, as a kill -9 at that moment would."""
HEADER_KEY = "radstack.spool"
CHECKPOINT_EVERY_S = 0.2
PERMANENT = {  # Kafka refuses the event for good: dead-letter it
    KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE, KafkaError.INVALID_MSG_SIZE,
    KafkaError.INVALID_RECORD, KafkaError.INVALID_MSG, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC,
    KafkaError._UNKNOWN_PARTITION, KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.TOPIC_EXCEPTION,
}


def _seq_of(headers: list[tuple[str, bytes | None]] | None, spool_id: bytes) -> int | None:
    """The sequence number a message of this spool carries, or None."""
    for k, v in headers or ():
        if k == HEADER_KEY and v is not None and len(v) == 24 and v[:16] == spool_id:
            return int.from_bytes(v[16:], "big")
    return None


class _Run:
    """Consecutive numbers of one entry produced to one partition (or, ``partition`` -1, found in Kafka
    by a scan): Kafka acknowledges them in order, so the first acknowledgement has the lowest offset.
    It is the delivery callback of its messages."""

    __slots__ = ("topic", "first_seq", "n", "partition", "done", "acked", "first_offset", "last_offset", "drainer")

    def __init__(self, topic: str, first_seq: int, n: int, partition: int, done: int = 0,
                 drainer: SpoolDrainer | None = None) -> None:
        self.topic = topic
        self.first_seq = first_seq
        self.n = n
        self.partition = partition
        self.done = done
        self.acked = 0
        self.first_offset = -1
        self.last_offset = -1
        self.drainer = drainer

    def __call__(self, err: KafkaError | None, msg: Message, alone: bool = False) -> None:
        if err is None:
            off = msg.offset()
            if self.first_offset < 0:
                self.first_offset = off
            if off > self.last_offset:  # a message produced again alone lands after the others
                self.last_offset = off
            self.acked += 1
        elif self.drainer is not None and not self.drainer._failed(self, err, msg, alone):
            return  # produced again on its own: counted when that one is acknowledged
        self.done += 1


class _Restart(Exception):
    """The producer must be replaced (a fatal error): scan Kafka again from the checkpoint."""


class SpoolDrainer:
    """Produces a :class:`Spool`'s events to Kafka in order; see the module docstring."""

    def __init__(self, spool: Spool, bootstrap_servers: str, **producer_conf: Any) -> None:
        self.spool = spool
        self.bootstrap = bootstrap_servers
        self.producer_conf = {
            **PRODUCER_DEFAULTS,
            "bootstrap.servers": bootstrap_servers,
            "message.timeout.ms": 0,  # never give up: the spool holds the events meanwhile
            "queue.buffering.max.messages": 100_000,
            **producer_conf,
            "error_cb": self._on_error,
        }
        self.kafka_down = False
        self.delivered = 0
        self._stop = threading.Event()
        self._producer: Producer | None = None
        self._fatal = False
        cp = spool.checkpoint
        self.committed = cp.committed
        self._start: dict[str, dict[int, int]] = {t: dict(ps) for t, ps in cp.start.items()}
        self._runs: deque[_Run] = deque()  # every number above committed, in order, in runs
        self._found: list[tuple[int, str, int, int]] = []  # (seq, topic, partition, offset) a scan found
        self._partitions: dict[str, int] = {}  # topic → partition count, read before producing to it
        self._alone: list[tuple[_Run, bytes, list[tuple[str, bytes]]]] = []  # refused with a too-large batch
        self._next_partition: dict[str, int] = {}
        self._dead: dict[int, str] = {}  # recent dead-lettered numbers → reason (for the waiting request)
        self._waiters: list[tuple[int, int, Callable[[], None]]] = []
        self._waiter_lock = threading.Lock()
        self._waiter_n = 0
        self._saved_at = 0.0
        self._drain_deadline = float("inf")
        self._saved_committed = cp.committed
        self._thread = threading.Thread(target=self._run, name="spool-drainer", daemon=True)
        fault = os.environ.get(FAULT_ENV, "")
        self._exit_after = int(fault.split(":", 1)[1]) if fault.startswith("exit_after_delivered:") else 0

    # -- public -----------------------------------------------------------------------------------
    def start(self) -> SpoolDrainer:
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Deliver what Kafka takes within ``timeout`` seconds, save the checkpoint, stop."""
        self._drain_deadline = time.monotonic() + timeout
        self._stop.set()
        with self.spool.appended:
            self.spool.appended.notify_all()
        self._thread.join(timeout + 10)

    async def wait_committed(self, seq: int, timeout: float) -> bool:
        """Wait (without holding a thread) until ``seq`` is committed; False after ``timeout`` s."""
        if self.committed >= seq:
            return True
        if timeout <= 0:
            return False
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(None))

        with self._waiter_lock:
            self._waiter_n += 1
            heapq.heappush(self._waiters, (seq, self._waiter_n, wake))
        if self.committed >= seq:
            return True
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            return False
        return True

    def dead_in(self, first: int, last: int) -> list[tuple[int, str]]:
        """Dead-lettered numbers in ``first`` … ``last`` that are still remembered, with the reason."""
        return [(s, self._dead[s]) for s in range(first, last + 1) if s in self._dead] if self._dead else []

    def topic_exists(self, topic: str, timeout: float = 5.0) -> bool:
        """Whether Kafka knows ``topic``; :class:`KafkaUnavailable` when it cannot tell now."""
        producer = self._producer
        if producer is None or self.kafka_down:
            raise KafkaUnavailable("Kafka is not reachable")
        try:
            t = producer.list_topics(topic, timeout=timeout).topics.get(topic)
        except KafkaException as e:
            raise KafkaUnavailable(f"cannot read Kafka metadata: {e}") from e
        return t is not None and t.error is None and bool(t.partitions)

    # -- the thread -------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                found = self._recover()
                if found is None:
                    continue
                self._pump(found)
            except _Restart:
                self._drop_producer()
                time.sleep(1.0)  # let requests the old producer had in flight land before the scan
            except Exception:  # noqa: BLE001 - Kafka lost mid-scan, a disk error: never stop draining
                log.exception("spool drainer: starting again from the checkpoint")
                self._drop_producer()
                self._stop.wait(1.0)
        self._save(force=True)
        self._drop_producer()

    def _on_error(self, err: KafkaError) -> None:
        if err.code() == KafkaError._ALL_BROKERS_DOWN:
            self.kafka_down = True
        if err.fatal():
            self._fatal = True

    def _new_producer(self) -> Producer:
        return Producer(self.producer_conf)

    def _consumer(self, **conf: Any) -> Consumer:
        """A consumer that only reads (metadata, watermarks, a scan): it never commits."""
        return Consumer({"bootstrap.servers": self.bootstrap, "group.id": "radstack-spool-scan",
                         "enable.auto.commit": False, **conf})

    def _drop_producer(self) -> None:
        p, self._producer = self._producer, None
        if p is not None:
            p.purge()
            p.poll(0)
            p.close()
        self._alone.clear()
        self._runs.clear()  # their messages sit after the committed ones of their partitions: a scan sees them
        self._partitions.clear()

    def _recover(self) -> set[int] | None:
        """Wait for Kafka, then find the numbers above the checkpoint that are already in Kafka.
        None when stopping before Kafka came back."""
        self._producer = self._new_producer()
        while not self._stop.is_set():
            try:
                md = self._producer.list_topics(timeout=2.0)
                if md.brokers:
                    break
            except KafkaException:
                pass
            self.kafka_down = True
            self._stop.wait(0.5)
        else:
            return None
        self.kafka_down = False
        topics: set[str] = set()
        cursor = self.spool.cursor(self.committed)
        self.spool.sync()
        while entries := cursor.read():
            topics.update(e.topic for e in entries)
        return self._scan(topics) if topics else set()

    def _scan(self, topics: set[str]) -> set[int]:
        """Numbers above ``committed`` in the headers of ``topics``, read from the checkpoint's offsets
        (a partition it does not know is read from its start) to the end."""
        consumer = self._consumer(**{"enable.partition.eof": True, "fetch.wait.max.ms": 50})
        found: set[int] = set()
        prefix = self.spool.spool_id
        origin = self._checkpoint().start  # below every number above committed (found ones included)
        self._found = []
        try:
            md = consumer.list_topics(timeout=10)
            assign: list[TopicPartition] = []
            ends: dict[tuple[str, int], int] = {}
            for t in topics:
                meta = md.topics.get(t)
                if meta is None or meta.error is not None:
                    continue
                for p in meta.partitions:
                    low, high = consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10)
                    frm = max(low, origin.get(t, {}).get(p, low))
                    if frm < high:
                        assign.append(TopicPartition(t, p, frm))
                        ends[(t, p)] = high
            if not assign:
                return found
            consumer.assign(assign)
            hits: list[tuple[str, int, int, int]] = []
            while ends:
                for m in consumer.consume(1000, timeout=1.0):
                    key = (m.topic(), m.partition())
                    if m.error() is not None:
                        if m.error().code() == KafkaError._PARTITION_EOF:
                            ends.pop(key, None)
                        continue
                    seq = _seq_of(m.headers(), prefix)
                    if seq is not None and seq > self.committed:
                        hits.append((m.topic(), m.partition(), m.offset(), seq))
                    if key in ends and m.offset() + 1 >= ends[key]:
                        ends.pop(key)
        finally:
            consumer.close()
        for t, p, off, seq in hits:
            found.add(seq)
            self._found.append((seq, t, p, off))
        self._found.sort()
        return found

    def _baseline(self, topic: str) -> None:
        """Before this producer first produces to ``topic``: its partition count, and (the first time
        this spool writes it) each partition's end, so a recovery scan starts there and not at the
        topic's beginning."""
        consumer = self._consumer()
        try:
            meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
            parts = {} if meta is None or meta.error is not None else meta.partitions
            if topic not in self._start:
                self._start[topic] = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                                      for p in parts}
            self._partitions[topic] = max(1, len(parts))
        except KafkaException as e:
            raise _Restart(str(e)) from e
        finally:
            consumer.close()
        self._save(force=True)

    def _pump(self, found: set[int]) -> None:
        producer = self._producer
        assert producer is not None
        cursor = self.spool.cursor(self.committed)
        last_seen = self.committed  # every number up to here has a run
        while True:
            if self._fatal:
                self._fatal = False
                raise _Restart("fatal producer error")
            if self._alone:
                self._produce_alone(producer)
            entries = cursor.read()
            if not entries and self.spool.last_seq > self.spool.durable_seq:
                self.spool.sync()  # produce only what is on disk
                entries = cursor.read()
            if not entries:
                if self._stop.is_set():
                    self._finish(producer)
                    return
                producer.poll(0.02 if self.committed < self.spool.last_seq else 0)
                self._advance()
                if self.committed >= self.spool.last_seq:
                    with self.spool.appended:
                        if cursor.seq >= self.spool.last_seq and not self._stop.is_set():
                            self.spool.appended.wait(0.2)
                continue
            for e in entries:
                if e.topic not in self._partitions:
                    self._baseline(e.topic)
                lo = max(e.first_seq, last_seen + 1)
                if lo > e.last_seq:
                    continue
                if not found:
                    self._produce_run(producer, e, lo, e.last_seq)
                else:  # split the entry around the numbers Kafka already has
                    a = lo
                    for seq in range(lo, e.last_seq + 2):
                        if seq > e.last_seq or seq in found:
                            if a < seq:
                                self._produce_run(producer, e, a, seq - 1)
                            if seq <= e.last_seq:
                                self._runs.append(_Run(e.topic, seq, 1, -1, done=1))
                            a = seq + 1
                last_seen = e.last_seq
                producer.poll(0)
                self._advance()
            if found and self.committed >= max(found):
                found.clear()

    def _produce_run(self, producer: Producer, e: Entry, a: int, b: int) -> None:
        """Produce numbers ``a`` … ``b`` of entry ``e`` to one partition (the next in turn for its topic)."""
        topic = e.topic
        n = self._partitions[topic]
        partition = self._next_partition.get(topic, 0) % n
        self._next_partition[topic] = partition + 1
        run = _Run(topic, a, b - a + 1, partition, drainer=self)
        self._runs.append(run)
        prefix = self.spool.spool_id
        produce = producer.produce
        values = e.values[a - e.first_seq: b - e.first_seq + 1]
        for seq, v in zip(range(a, b + 1), values, strict=True):
            hdr = [(HEADER_KEY, prefix + seq.to_bytes(8, "big"))]  # read back by _seq_of
            while True:
                try:
                    produce(topic, v, partition=partition, headers=hdr, on_delivery=run)
                    break
                except BufferError:  # Kafka away or slower than the input: wait for room
                    producer.poll(0.1)
                    self._advance()
                    if self._fatal:
                        self._fatal = False
                        raise _Restart("fatal producer error") from None
                    if self._stop.is_set() and time.monotonic() > self._drain_deadline:
                        raise _Restart("stopping with Kafka away") from None

    def _finish(self, producer: Producer) -> None:
        """Stopping: wait for acknowledgements until the drain deadline, then keep the rest spooled."""
        while self.committed < self.spool.last_seq and time.monotonic() < self._drain_deadline:
            producer.poll(0.05)
            self._advance()
            if self.kafka_down:
                break
        self._advance()
        producer.purge()

    def _failed(self, run: _Run, err: KafkaError, msg: Message, alone: bool = False) -> bool:
        """A message of ``run`` failed; True when that settles it. Kafka refusing a record batch as too
        large refuses every message in it, so such a message is produced again on its own first
        (:meth:`_produce_alone`); refused alone, or refused for another permanent reason, it is
        dead-lettered. Any other failure leaves open whether Kafka has it: replace the producer, scan."""
        code = err.code()
        if code in PERMANENT:
            if code in TOO_LARGE_CODES and not alone:
                self._alone.append((run, msg.value() or b"", msg.headers() or []))
                return False
            seq = _seq_of(msg.headers(), self.spool.spool_id) or run.first_seq
            self._dead_letter(seq, run.topic, msg.value(), f"{err.name()}: {err.str()}")
            return True
        self._fatal = True
        return True

    def _produce_alone(self, producer: Producer) -> None:
        """Produce each message of a refused batch in a batch of its own (rare: waits for each)."""
        while self._alone:
            run, value, headers = self._alone.pop(0)
            settled = threading.Event()

            def cb(err: KafkaError | None, msg: Message, run: _Run = run, settled: threading.Event = settled) -> None:
                run(err, msg, alone=True)
                settled.set()

            producer.flush(30)  # nothing else in the batch
            producer.produce(run.topic, value, partition=run.partition, headers=headers, on_delivery=cb)
            while not settled.is_set() and not self._fatal and not self._stop.is_set():
                producer.flush(1.0)

    def _dead_letter(self, seq: int, topic: str, value: bytes | None, reason: str) -> None:
        d = dead_letter_dir(self.spool.directory)
        d.mkdir(exist_ok=True)
        with open(d / f"{topic}.ndjson", "ab") as f:
            f.write(orjson.dumps({"seq": seq, "topic": topic, "reason": reason,
                                  "event": (value or b"").decode("utf-8", "replace")}) + b"\n")
        if len(self._dead) > 10_000:
            self._dead.clear()
        self._dead[seq] = reason

    def _advance(self) -> None:
        """Move ``committed`` over the finished runs, wake the requests it covers, checkpoint."""
        runs = self._runs
        if not runs or runs[0].done < runs[0].n:
            self._save()
            return
        c = self.committed
        while runs and runs[0].done >= runs[0].n:
            r = runs.popleft()
            c = r.first_seq + r.n - 1
            self.delivered += r.acked
            if r.last_offset >= 0:
                ends = self._start.setdefault(r.topic, {})
                ends[r.partition] = max(ends.get(r.partition, 0), r.last_offset + 1)
        if self._exit_after and self.delivered >= self._exit_after:
            os._exit(87)
        self.committed = c
        self.kafka_down = False
        if self._found and self._found[0][0] <= c:
            self._found = [f for f in self._found if f[0] > c]
        with self._waiter_lock:
            while self._waiters and self._waiters[0][0] <= c:
                heapq.heappop(self._waiters)[2]()
        self._save()

    def _checkpoint(self) -> Checkpoint:
        """``start`` per partition: where a scan must begin to see every number above ``committed`` —
        the end of the committed ones, or earlier where an uncommitted one already sits."""
        start: dict[str, dict[int, int]] = {t: dict(ps) for t, ps in self._start.items()}
        lower = [(r.topic, r.partition, r.first_offset) for r in self._runs if r.first_offset >= 0]
        lower += [(t, p, off) for _, t, p, off in self._found]
        for t, p, off in lower:
            ps = start.setdefault(t, {})
            ps[p] = min(ps.get(p, off), off)
        return Checkpoint(self.committed, start)

    def _save(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and (self.committed == self._saved_committed or now - self._saved_at < CHECKPOINT_EVERY_S):
            return
        self.spool.save_checkpoint(self._checkpoint())
        self._saved_at = now
        self._saved_committed = self.committed
