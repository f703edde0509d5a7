"""What every generator shares: duplicate and late-event injection, rate limiting, sinks (Kafka or
files), the truth log, progress and the final summary.

A generator is an iterator of :class:`Emit` in delivery order. Each unique event is emitted once
with ``duplicate=False`` (and goes to the truth log ``truth/<stream>.jsonl``); re-sends are exact
copies (same bytes, same event id) with ``duplicate=True``. Late events carry a timestamp minutes to
hours before the point of the stream where they are delivered (``late=True``).

Everything derives from ``random.Random(seed)`` and ``start_ms``: the same options give the same
bytes, so later tests can recompute the exact truth independently.
"""

from __future__ import annotations

import bisect
import math
import random
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from realtime.producer import BatchProducer

LATE_MIN_MS = 2 * 60 * 1000  # "minutes …
LATE_MAX_MS = 3 * 3600 * 1000  # … to hours"
RECENT = 256  # duplicates re-send one of the last RECENT unique events


@dataclass(frozen=True)
class Emit:
    stream: str  # logical stream: impressions | clicks | netflow
    key: bytes  # the event id (Kafka message key)
    value: bytes  # the JSON event
    duplicate: bool = False
    late: bool = False


@dataclass
class GeneratorOptions:
    events: int = 10_000  # unique primary events (impressions / packet samples)
    seed: int = 1
    start_ms: int = 0  # event time of the first event (0 → now, floored to the second)
    sim_rate: float = 1000.0  # primary events per second of event time
    duplicates: float = 0.05
    late: float = 0.02
    late_max_ms: int = LATE_MAX_MS  # the latest a late event arrives after its timestamp
    ctr: float = 0.1  # ads: click-through rate
    #: called (once) before the first late event is emitted: the quickstart waits there until the stream
    #: has committed a micro-batch, so its watermark exists and the late events are late for it
    before_first_late: Callable[[], object] | None = None

    def resolved_start(self) -> int:
        return self.start_ms or int(time.time()) * 1000


class Injector:
    """Seeded duplicate and late-event injection shared by the generators."""

    def __init__(self, rng: random.Random, duplicates: float, late: float, late_max_ms: int = LATE_MAX_MS,
                 before_first_late: Callable[[], object] | None = None) -> None:
        if not 0 <= duplicates < 1 or not 0 <= late < 1:
            raise ValueError("duplicate and late rates must be in [0, 1)")
        if late_max_ms <= LATE_MIN_MS:
            raise ValueError(f"the latest delay must be more than {LATE_MIN_MS // 60_000} minutes")
        self.rng = rng
        self.late_max_ms = late_max_ms
        self.duplicates = duplicates
        self.late = late
        self.recent: deque[Emit] = deque(maxlen=RECENT)
        self.before_first_late = before_first_late

    def late_delay_ms(self) -> int:
        """0 for an on-time event; else a log-uniform delay between 2 minutes and ``late_max_ms``
        (3 hours by default)."""
        if self.late <= 0 or self.rng.random() >= self.late:
            return 0
        lo, hi = math.log(LATE_MIN_MS), math.log(self.late_max_ms)
        delay = int(math.exp(self.rng.uniform(lo, hi)))
        if self.before_first_late is not None:
            wait, self.before_first_late = self.before_first_late, None
            wait()
        return delay

    def after(self, emit: Emit) -> Iterator[Emit]:
        """Yield ``emit``, then (with the duplicate rate) an exact re-send of a recent event."""
        yield emit
        self.recent.append(emit)
        if self.duplicates > 0 and self.rng.random() < self.duplicates:
            orig = self.recent[self.rng.randrange(len(self.recent))]
            yield Emit(orig.stream, orig.key, orig.value, duplicate=True, late=orig.late)


def weighted(rng: random.Random, items: list[Any], weights: list[float]) -> Callable[[], Any]:
    cum: list[float] = []
    total = 0.0
    for w in weights:
        total += w
        cum.append(total)

    def pick() -> Any:
        return items[bisect.bisect_right(cum, rng.random() * total)]

    return pick


def zipf_weights(n: int, s: float = 1.1) -> list[float]:
    return [1.0 / (i + 1) ** s for i in range(n)]


class RateLimiter:
    """At most ``rate`` messages per second on average (0 = unlimited)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.t0 = time.monotonic()
        self.n = 0

    def acquire(self, n: int = 1) -> None:
        self.n += n
        if self.rate <= 0:
            return
        ahead = self.n / self.rate - (time.monotonic() - self.t0)
        if ahead > 0.002:
            time.sleep(ahead)


# -- sinks ----------------------------------------------------------------------------------------
class FileSink:
    """One ``<stream>.jsonl`` per stream, in delivery order (with duplicates)."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.files: dict[str, IO[bytes]] = {}

    def write(self, e: Emit) -> None:
        f = self.files.get(e.stream)
        if f is None:
            f = self.files[e.stream] = open(self.out_dir / f"{e.stream}.jsonl", "wb")  # noqa: SIM115
        f.write(e.value + b"\n")

    def close(self) -> None:
        for f in self.files.values():
            f.close()

    def paths(self) -> list[str]:
        return [str(self.out_dir / f"{s}.jsonl") for s in self.files]


class KafkaSink:
    """Produces each stream to its topic (key = event id) through the batch producer; ``close``
    waits until every message is acknowledged and raises if any failed."""

    BATCH = 1000

    def __init__(self, bootstrap_servers: str, topics: dict[str, str]) -> None:

        self.topics = topics
        self.producer = BatchProducer(bootstrap_servers, delivery_timeout_ms=60_000)
        self.pending: dict[str, tuple[list[bytes], list[bytes | None]]] = {}
        self.batches: deque[Any] = deque()
        self.delivered = 0
        self.failed = 0
        self.error: str | None = None

    def write(self, e: Emit) -> None:
        vals, keys = self.pending.setdefault(e.stream, ([], []))
        vals.append(e.value)
        keys.append(e.key)
        if len(vals) >= self.BATCH:
            self._send(e.stream)

    def _send(self, stream: str) -> None:
        vals, keys = self.pending.pop(stream, ([], []))
        if vals:
            self.batches.append(self.producer.send(self.topics[stream], vals, keys))
        while self.batches and self.batches[0].done:
            self._account(self.batches.popleft().result())

    def _account(self, r: Any) -> None:
        self.delivered += r.delivered
        self.failed += r.failed
        self.error = self.error or r.error

    def send_pending(self) -> None:
        """Hand every message held for a batch to the producer now."""
        for s in list(self.pending):
            self._send(s)

    def close(self) -> None:
        self.send_pending()
        while self.batches:
            self._account(self.batches.popleft().wait(90))
        self.producer.close()
        if self.failed:
            raise RuntimeError(f"{self.failed} message(s) were not delivered to Kafka: {self.error}")


class TruthLog:
    """``truth/<stream>.jsonl``: every unique event exactly once, in delivery order."""

    def __init__(self, out_dir: Path) -> None:
        self.dir = out_dir / "truth"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.files: dict[str, IO[bytes]] = {}

    def write(self, e: Emit) -> None:
        f = self.files.get(e.stream)
        if f is None:
            f = self.files[e.stream] = open(self.dir / f"{e.stream}.jsonl", "wb")  # noqa: SIM115
        f.write(e.value + b"\n")

    def close(self) -> None:
        for f in self.files.values():
            f.close()


# -- running --------------------------------------------------------------------------------------
@dataclass
class StreamCounts:
    unique: int = 0
    duplicates: int = 0
    late: int = 0


@dataclass
class RunSummary:
    generator: str
    seed: int
    start_ms: int
    sent: int = 0
    streams: dict[str, StreamCounts] = field(default_factory=dict)
    seconds: float = 0.0
    sink: str = ""
    files: list[str] = field(default_factory=list)

    @property
    def duplicates(self) -> int:
        return sum(c.duplicates for c in self.streams.values())

    @property
    def late(self) -> int:
        return sum(c.late for c in self.streams.values())

    @property
    def unique(self) -> int:
        return sum(c.unique for c in self.streams.values())

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(unique=self.unique, duplicates=self.duplicates, late=self.late)
        return d


def run(
    name: str,
    events: Iterator[Emit],
    opts: GeneratorOptions,
    start_ms: int,
    sink: FileSink | KafkaSink,
    out_dir: Path,
    rate: float = 0.0,
    primary: str = "",
    progress: Callable[[int], None] | None = None,
) -> RunSummary:
    """Drive ``events`` into ``sink`` at ``rate`` msg/s, writing the truth log and ``summary.json``.
    ``progress(n)`` is called with the number of unique ``primary`` events so far (every 500)."""
    truth = TruthLog(out_dir)
    limiter = RateLimiter(rate)
    summary = RunSummary(name, opts.seed, start_ms, sink="kafka" if isinstance(sink, KafkaSink) else "file")
    t0 = time.monotonic()
    n_primary = 0
    try:
        for e in events:
            limiter.acquire()
            sink.write(e)
            summary.sent += 1
            c = summary.streams.get(e.stream)
            if c is None:
                c = summary.streams[e.stream] = StreamCounts()
            if e.duplicate:
                c.duplicates += 1
                continue
            c.unique += 1
            if e.late:
                c.late += 1
            truth.write(e)
            if e.stream == primary:
                n_primary += 1
                if progress is not None and n_primary % 500 == 0:
                    progress(n_primary)
    finally:
        truth.close()
        sink.close()
    if progress is not None:
        progress(n_primary)
    summary.seconds = round(time.monotonic() - t0, 3)
    if isinstance(sink, FileSink):
        summary.files += sink.paths()
    summary.files += sorted(str(p) for p in truth.dir.glob("*.jsonl"))
    (out_dir / "summary.json").write_bytes(orjson.dumps(summary.as_dict(), option=orjson.OPT_INDENT_2))
    return summary
