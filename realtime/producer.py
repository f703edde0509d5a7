"""Delivering batches of events to Kafka with confluent-kafka: ``acks=all``, idempotence on, and an
answer per batch once every message in it is acknowledged (or failed).

One :class:`BatchProducer` is shared by many callers (threads or asyncio tasks): a poller thread serves
the delivery callbacks, each :meth:`BatchProducer.send` returns a :class:`Batch` whose completion can
be waited for (:meth:`Batch.wait`) or awaited (:meth:`BatchProducer.deliver_async`).

Kafka being unavailable shows up as :class:`KafkaUnavailable`: the local queue stays full (broker down
or too slow), messages time out (``message.timeout.ms`` = the delivery timeout), or no broker answers.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

PRODUCER_DEFAULTS: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    "compression.type": "lz4",
    "batch.num.messages": 10_000,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 200_000,
    "queue.buffering.max.kbytes": 128 * 1024,
    "message.timeout.ms": 10_000,
    "socket.nagle.disable": True,
}


class KafkaUnavailable(RuntimeError):
    """Kafka cannot take the events now (broker down, queue full, delivery timed out): retry later."""


class MessageTooLarge(ValueError):
    """An event is larger than Kafka accepts (``message.max.bytes``): retrying cannot help."""


TOO_LARGE_CODES = {KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE}


@dataclass(frozen=True)
class BatchResult:
    delivered: int
    failed: int
    error: str | None = None
    too_large: bool = False  # Kafka refused an event as larger than message.max.bytes

    @property
    def ok(self) -> bool:
        return self.failed == 0


class Batch:
    """The delivery state of one batch. Callbacks arrive on the poller thread."""

    __slots__ = ("_lock", "_done", "_listeners", "remaining", "delivered", "failed", "error", "fatal", "too_large")

    def __init__(self, size: int) -> None:
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._listeners: list[Callable[[], None]] = []
        self.remaining = size
        self.delivered = 0
        self.failed = 0
        self.error: str | None = None
        self.fatal = False
        self.too_large = False
        if size == 0:
            self._done.set()

    def on_delivery(self, err: KafkaError | None, _msg: Any) -> None:
        with self._lock:
            if err is None:
                self.delivered += 1
            else:
                self.failed += 1
                if self.error is None:
                    self.error = f"{err.name()}: {err.str()}"
                if err.fatal():
                    self.fatal = True
                if err.code() in TOO_LARGE_CODES:
                    self.too_large = True
            self.remaining -= 1
            finished = self.remaining == 0
        if finished:
            self._finish()

    def abandon(self, count: int, reason: str) -> None:
        """``count`` messages were never produced (the queue stayed full)."""
        with self._lock:
            self.failed += count
            self.error = self.error or reason
            self.remaining -= count
            finished = self.remaining == 0
        if finished:
            self._finish()

    def _finish(self) -> None:
        self._done.set()
        for cb in self._listeners:
            cb()

    def add_done_callback(self, cb: Callable[[], None]) -> None:
        with self._lock:
            if not self._done.is_set():
                self._listeners.append(cb)
                return
        cb()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def result(self) -> BatchResult:
        return BatchResult(self.delivered, self.failed, self.error, self.too_large)

    def wait(self, timeout: float | None = None) -> BatchResult:
        if not self._done.wait(timeout):
            raise KafkaUnavailable(f"delivery not confirmed within {timeout}s")
        return self.result()


def _weak_callback(method: Callable[..., None]) -> Callable[..., None]:
    """``method`` called through a weak reference: a client holding it does not keep its object alive."""
    ref = weakref.WeakMethod(method)

    def call(*args: Any) -> None:
        bound = ref()
        if bound is not None:
            bound(*args)

    return call


class BatchProducer:
    """A shared, thread-safe producer for batches of pre-serialized events."""

    def __init__(
        self,
        bootstrap_servers: str,
        delivery_timeout_ms: int = 10_000,
        queue_full_wait_s: float = 2.0,
        **conf: Any,
    ) -> None:
        self.conf = {
            **PRODUCER_DEFAULTS,
            "bootstrap.servers": bootstrap_servers,
            "message.timeout.ms": int(delivery_timeout_ms),
            # weakly: the client holding this object would be a cycle the collector cannot break, and a
            # closed producer kept its threads, retrying a cluster long gone, for the life of the process
            "error_cb": _weak_callback(self._on_error),
            **conf,
        }
        self.delivery_timeout_s = delivery_timeout_ms / 1000.0
        self.queue_full_wait_s = queue_full_wait_s
        self.brokers_down = False
        self._fatal = False
        self._lock = threading.Lock()
        self._producer = Producer(self.conf)
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll_loop, name="kafka-producer-poll", daemon=True)
        self._poller.start()

    # -- internals --------------------------------------------------------------------------------
    def _poll_loop(self) -> None:
        while not self._stop.is_set():
            producer = self._producer
            try:
                producer.poll(0.05)
            except Exception:  # a callback raised; keep serving the others
                time.sleep(0.01)

    def _on_error(self, err: KafkaError) -> None:
        if err.code() == KafkaError._ALL_BROKERS_DOWN:
            self.brokers_down = True
        if err.fatal():
            self._fatal = True

    def _replace_if_fatal(self) -> None:
        if not self._fatal:
            return
        with self._lock:
            if self._fatal:
                old = self._producer
                self._producer = Producer(self.conf)
                self._fatal = False
                old.purge()

    # -- API --------------------------------------------------------------------------------------
    def check_available(self, timeout: float = 2.0) -> None:
        """After the client saw all brokers down: raise :class:`KafkaUnavailable` unless a metadata
        request now succeeds (so requests fail fast while Kafka is away and recover when it is back)."""
        if not self.brokers_down:
            return
        try:
            md = self._producer.list_topics(timeout=timeout)
        except KafkaException as e:
            raise KafkaUnavailable(f"no Kafka broker is reachable: {e}") from e
        if not md.brokers:
            raise KafkaUnavailable("no Kafka broker is reachable")
        self.brokers_down = False

    def topic_exists(self, topic: str, timeout: float = 5.0) -> bool:
        try:
            md = self._producer.list_topics(topic, timeout=timeout)
        except KafkaException as e:
            raise KafkaUnavailable(f"cannot read Kafka metadata: {e}") from e
        t = md.topics.get(topic)
        return t is not None and t.error is None and bool(t.partitions)

    def send(self, topic: str, values: Sequence[bytes], keys: Sequence[bytes | None] | None = None) -> Batch:
        """Queue every value for ``topic`` (with ``keys[i]`` when given) and return the batch's state.

        Raises :class:`KafkaUnavailable` when the local queue stays full for ``queue_full_wait_s``
        (the part already queued is still delivered; the batch then reports the rest as failed)."""
        self._replace_if_fatal()
        n = len(values)
        batch = Batch(n)
        if n == 0:
            return batch
        produce = self._producer.produce
        cb = batch.on_delivery
        i = 0
        try:
            if keys is None:
                for i, v in enumerate(values):  # noqa: B007 - i is read in the except clause
                    try:
                        produce(topic, v, on_delivery=cb)
                    except BufferError:
                        self._wait_for_room(lambda v=v: produce(topic, v, on_delivery=cb))
            else:
                for i, (v, k) in enumerate(zip(values, keys, strict=True)):  # noqa: B007
                    try:
                        produce(topic, v, k, on_delivery=cb)
                    except BufferError:
                        self._wait_for_room(lambda v=v, k=k: produce(topic, v, k, on_delivery=cb))
        except KafkaUnavailable as e:
            batch.abandon(n - i, str(e))
            raise
        except KafkaException as e:
            batch.abandon(n - i, str(e))
            if e.args and isinstance(e.args[0], KafkaError) and e.args[0].code() in TOO_LARGE_CODES:
                raise MessageTooLarge(str(e)) from e
            raise KafkaUnavailable(str(e)) from e
        return batch

    def _wait_for_room(self, produce_one: Callable[[], None]) -> None:
        deadline = time.monotonic() + self.queue_full_wait_s
        while True:
            time.sleep(0.005)  # the poller thread drains delivery reports meanwhile
            try:
                produce_one()
                return
            except BufferError:
                if time.monotonic() > deadline:
                    raise KafkaUnavailable(
                        "the producer's queue is full (Kafka is down or slower than the input)"
                    ) from None

    def deliver(
        self, topic: str, values: Sequence[bytes], keys: Sequence[bytes | None] | None = None
    ) -> BatchResult:
        """Send and wait for the whole batch (blocking)."""
        return self.send(topic, values, keys).wait(self.delivery_timeout_s + 5.0)

    async def deliver_async(
        self, topic: str, values: Sequence[bytes], keys: Sequence[bytes | None] | None = None
    ) -> BatchResult:
        """Send and await the whole batch without holding a thread while waiting."""
        loop = asyncio.get_running_loop()
        batch = self.send(topic, values, keys)
        fut: asyncio.Future[None] = loop.create_future()

        def _done() -> None:
            loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(None))

        batch.add_done_callback(_done)
        try:
            await asyncio.wait_for(fut, self.delivery_timeout_s + 5.0)
        except TimeoutError as e:
            raise KafkaUnavailable("delivery not confirmed in time") from e
        return batch.result()

    def flush(self, timeout: float = 30.0) -> int:
        return self._producer.flush(timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Deliver what is queued (up to ``timeout``), then end the client. Idempotent."""
        if self._stop.is_set():
            return
        try:
            self._producer.flush(timeout)
        finally:
            self._stop.set()
            self._poller.join(timeout=2)
