"""The receiver's write-ahead spool: accepted events on local disk, in order, until Kafka has them.

Layout of the spool directory (one receiver process holds it, with an exclusive ``flock``):

- ``id`` — this spool's identity (16 random bytes, hex). Every Kafka message the drainer produces
  carries it with the event's sequence number in the ``radstack.spool`` header, so a restart after a
  crash can tell which spooled events already reached Kafka.
- ``<first seq, 20 digits>.spool`` — segment files of entries. An entry is one request's accepted
  events for one topic: a header (magic, body length, CRC-32, first sequence number, event count,
  topic length), then the topic, the event lengths (u32 each) and the events. A torn entry at the end
  of the newest segment (the process died while writing it; it was never acknowledged) is cut off
  when the spool opens.
- ``checkpoint.json`` — what the drainer has delivered: every sequence number up to ``committed``,
  and per topic partition the offset from which messages of this spool with higher numbers can be
  found. Written atomically (temp file, fsync, rename). Segments whose events are all committed
  are deleted.

Sequence numbers start at 1 and never repeat for a spool directory.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import struct
import threading
import zlib
from array import array
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any, Literal

import orjson

MAGIC = b"RSP1"
HEADER = struct.Struct("<4sIIQIH")  # magic, body length, crc32(seq..body), first seq, count, topic length
CRC_PART = struct.Struct("<QIH")
SUFFIX = ".spool"
CHECKPOINT = "checkpoint.json"
FsyncPolicy = Literal["always", "interval", "never"]


class SpoolError(RuntimeError):
    """The spool cannot be used (held by another process, unreadable)."""


class SpoolFull(SpoolError):
    """Appending would pass ``max_bytes`` (or the disk is full): answer 503, the client retries."""


@dataclass(frozen=True)
class Entry:
    """One append: ``values`` for ``topic``, numbered ``first_seq`` … ``last_seq``."""

    first_seq: int
    topic: str
    values: list[bytes]

    @property
    def last_seq(self) -> int:
        return self.first_seq + len(self.values) - 1


@dataclass
class Checkpoint:
    committed: int = 0  # every sequence number up to this one is in Kafka (or dead-lettered)
    start: dict[str, dict[int, int]] = field(default_factory=dict)  # topic → partition → scan-from offset

    def to_json(self) -> bytes:
        return orjson.dumps({"committed": self.committed,
                             "start": {t: {str(p): o for p, o in ps.items()} for t, ps in self.start.items()}})

    @classmethod
    def from_json(cls, raw: bytes) -> Checkpoint:
        doc = orjson.loads(raw)
        return cls(int(doc["committed"]), {t: {int(p): int(o) for p, o in ps.items()} for t, ps in doc["start"].items()})


@dataclass(frozen=True)
class SpoolStats:
    directory: str
    depth: int  # events accepted but not yet known to be in Kafka
    bytes: int  # on disk, segments not yet deleted
    segments: int
    committed: int
    last_seq: int
    dead_lettered: int

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def encode_entry(first_seq: int, topic: str, values: list[bytes]) -> bytes:
    t = topic.encode()
    lengths = array("I", map(len, values))
    if lengths.itemsize != 4:  # pragma: no cover - every platform radstack runs on has a 4-byte int
        raise SpoolError("array('I') is not 4 bytes here")
    body = b"".join((t, lengths.tobytes(), *values))
    crc = zlib.crc32(body, zlib.crc32(CRC_PART.pack(first_seq, len(values), len(t))))
    return HEADER.pack(MAGIC, len(body), crc, first_seq, len(values), len(t)) + body


def iter_entries(buf: bytes | memoryview, verify: bool = True) -> Iterator[tuple[Entry, int]]:
    """The whole entries at the start of ``buf``, each with the offset just past it. Stops at the first
    incomplete or (``verify``) corrupt entry."""
    pos = 0
    n = len(buf)
    mv = memoryview(buf)
    while pos + HEADER.size <= n:
        magic, size, crc, first, count, tlen = HEADER.unpack_from(mv, pos)
        end = pos + HEADER.size + size
        if magic != MAGIC or end > n or tlen + 4 * count > size:
            return
        body = mv[pos + HEADER.size: end]
        if verify and zlib.crc32(body, zlib.crc32(CRC_PART.pack(first, count, tlen))) != crc:
            return
        lengths = array("I")
        lengths.frombytes(body[tlen: tlen + 4 * count])
        base = tlen + 4 * count
        bounds = [base, *accumulate(lengths, initial=base)][1:]
        raw = bytes(body)
        values = [raw[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
        yield Entry(first, raw[:tlen].decode(), values), end
        pos = end


def decode_entries(buf: bytes | memoryview, verify: bool = True) -> tuple[list[Entry], int]:
    """The whole entries at the start of ``buf`` and the number of bytes they take."""
    pairs = list(iter_entries(buf, verify))
    return [e for e, _ in pairs], (pairs[-1][1] if pairs else 0)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _segment_path(directory: Path, first_seq: int) -> Path:
    return directory / f"{first_seq:020d}{SUFFIX}"


def _segments(directory: Path) -> list[tuple[int, Path]]:
    return sorted((int(p.name[: -len(SUFFIX)]), p) for p in directory.glob(f"*{SUFFIX}")
                  if p.name[: -len(SUFFIX)].isdigit())


def read_checkpoint(directory: Path) -> Checkpoint:
    path = directory / CHECKPOINT
    try:
        return Checkpoint.from_json(path.read_bytes())
    except FileNotFoundError:
        return Checkpoint()
    except (ValueError, KeyError, TypeError) as e:
        raise SpoolError(f"{path} is unreadable ({e}); it is written atomically, so something else changed it") from e


def dead_letter_dir(directory: Path) -> Path:
    return directory / "dead-letter"


def inspect(directory: Path) -> SpoolStats | None:
    """The spool's figures read from disk (works while the receiver runs, or when it is down); None when
    there is no spool there. The depth lags the drainer by at most one checkpoint interval."""
    if not (directory / "id").exists():
        return None
    cp = read_checkpoint(directory)
    segs = _segments(directory)
    last = cp.committed
    if segs:
        with open(segs[-1][1], "rb") as f:  # headers only: seek from entry to entry
            pos = 0
            while True:
                f.seek(pos)
                head = f.read(HEADER.size)
                if len(head) < HEADER.size:
                    break
                magic, size, _crc, first, count, _t = HEADER.unpack(head)
                if magic != MAGIC:
                    break
                pos += HEADER.size + size
                last = max(last, first + count - 1)
        last = max(last, segs[-1][0] - 1)
    dead = sum(1 for p in dead_letter_dir(directory).glob("*.ndjson") for _ in p.open("rb"))
    return SpoolStats(str(directory), max(0, last - cp.committed), sum(p.stat().st_size for _, p in segs),
                      len(segs), cp.committed, last, dead)


class Spool:
    """An append-only, size-capped, crash-safe log of accepted events (thread-safe)."""

    def __init__(self, directory: Path, max_bytes: int = 1 << 30, segment_bytes: int = 64 << 20,
                 fsync: FsyncPolicy = "always", fsync_interval_ms: int = 1000) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.max_bytes = int(max_bytes)
        self.segment_bytes = int(segment_bytes)
        self.fsync = fsync
        self._lock_fd = os.open(self.directory / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise SpoolError(f"the spool {self.directory} is in use by another receiver process "
                             "(receiver.spool.dir must differ per process)") from None
        self.spool_id = self._identity()
        self.checkpoint = read_checkpoint(self.directory)
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self.appended = threading.Condition(self._lock)  # notified on every append
        self._segments: list[tuple[int, Path]] = _segments(self.directory)
        self._sizes: dict[Path, int] = {}
        self._next_seq = self.checkpoint.committed + 1
        self._recover_tail()
        self._bytes = sum(self._sizes.values())
        self._delete_committed()
        self._fd = -1
        self._open_current()
        self._written_seq = self._next_seq - 1
        self._synced_seq = self._written_seq
        self._closed = threading.Event()
        self._syncer: threading.Thread | None = None
        if fsync == "interval":
            self._syncer = threading.Thread(target=self._sync_loop, args=(fsync_interval_ms / 1000.0,),
                                            name="spool-fsync", daemon=True)
            self._syncer.start()

    # -- opening ----------------------------------------------------------------------------------
    def _identity(self) -> bytes:
        path = self.directory / "id"
        try:
            return bytes.fromhex(path.read_text().strip())
        except FileNotFoundError:
            ident = secrets.token_bytes(16)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(ident.hex())
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            os.replace(tmp, path)
            _fsync_dir(self.directory)
            return ident

    def _recover_tail(self) -> None:
        """Sizes of the segments; the newest is read through and cut after its last whole entry."""
        for i, (first, path) in enumerate(self._segments):
            size = path.stat().st_size
            if i == len(self._segments) - 1:
                data = path.read_bytes()
                entries, good = decode_entries(data)
                if good < size:
                    with open(path, "r+b") as f:
                        f.truncate(good)
                        os.fsync(f.fileno())
                    size = good
                last = entries[-1].last_seq if entries else first - 1
                self._next_seq = max(self._next_seq, last + 1, first)
            self._sizes[path] = size

    def _open_current(self) -> None:
        if not self._segments:
            path = _segment_path(self.directory, self._next_seq)
            self._segments.append((self._next_seq, path))
            self._sizes[path] = 0
        path = self._segments[-1][1]
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        _fsync_dir(self.directory)

    # -- writing ----------------------------------------------------------------------------------
    def append(self, topic: str, values: list[bytes]) -> Entry:
        """Write ``values`` for ``topic`` as one entry; durable per the fsync policy when this returns.
        Raises :class:`SpoolFull` when the entry would pass ``max_bytes`` (or the disk is full)."""
        if not values:
            raise ValueError("an entry holds at least one event")
        with self._lock:
            if self._closed.is_set():
                raise SpoolError("the spool is closed")
            first = self._next_seq
            buf = encode_entry(first, topic, values)
            if self._bytes + len(buf) > self.max_bytes:
                raise SpoolFull(f"the spool holds {self._bytes:,} bytes; this request needs {len(buf):,} more "
                                f"than receiver.spool.max_bytes ({self.max_bytes:,}) allows")
            path = self._segments[-1][1]
            if self._sizes[path] and self._sizes[path] + len(buf) > self.segment_bytes:
                self._roll(first)
                path = self._segments[-1][1]
            try:
                view = memoryview(buf)
                while view:
                    view = view[os.write(self._fd, view):]
            except OSError as e:  # ENOSPC and friends: cut the torn entry off again
                os.ftruncate(self._fd, self._sizes[path])
                raise SpoolFull(f"cannot write the spool: {e}") from e
            self._sizes[path] += len(buf)
            self._bytes += len(buf)
            self._next_seq = first + len(values)
            self._written_seq = self._next_seq - 1
            self.appended.notify_all()
        entry = Entry(first, topic, values)
        if self.fsync == "always":
            self._sync_to(entry.last_seq)
        return entry

    def _roll(self, first: int) -> None:
        os.fsync(self._fd)
        os.close(self._fd)
        self._synced_seq = max(self._synced_seq, self._written_seq)
        path = _segment_path(self.directory, first)
        self._segments.append((first, path))
        self._sizes[path] = 0
        self._open_current()

    def _sync_to(self, seq: int) -> None:
        """Group commit: one fsync covers every append written before it started."""
        with self._sync_lock:
            if self._synced_seq >= seq:
                return
            with self._lock:
                target = self._written_seq
                fd = os.dup(self._fd)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self._synced_seq = max(self._synced_seq, target)

    def _sync_loop(self, period: float) -> None:
        while not self._closed.wait(period):
            self._sync_to(self._written_seq)

    # -- reading and committing -------------------------------------------------------------------
    @property
    def last_seq(self) -> int:
        return self._next_seq - 1

    @property
    def durable_seq(self) -> int:
        """The last number on disk per the fsync policy (``never``: the last written): the drainer produces
        nothing above it, so a number Kafka holds is never handed out again after a machine crash."""
        return self._written_seq if self.fsync == "never" else self._synced_seq

    def sync(self) -> None:
        """fsync everything written so far."""
        self._sync_to(self._written_seq)

    def cursor(self, after_seq: int) -> SpoolCursor:
        """A reader of the entries holding numbers above ``after_seq``, in order."""
        return SpoolCursor(self, after_seq)

    def _view(self) -> tuple[list[tuple[int, Path]], dict[Path, int]]:
        with self._lock:
            return list(self._segments), dict(self._sizes)

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Persist what the drainer delivered, atomically; delete segments that are all delivered."""
        path = self.directory / CHECKPOINT
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(checkpoint.to_json())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_dir(self.directory)
        with self._lock:
            self.checkpoint = Checkpoint(checkpoint.committed, {t: dict(ps) for t, ps in checkpoint.start.items()})
            self._delete_committed()

    def _delete_committed(self) -> None:
        """Segments before the newest whose numbers are all committed (called with the lock held)."""
        keep: list[tuple[int, Path]] = []
        for i, (first, path) in enumerate(self._segments):
            nxt = self._segments[i + 1][0] if i + 1 < len(self._segments) else None
            if nxt is not None and nxt - 1 <= self.checkpoint.committed:
                path.unlink(missing_ok=True)
                self._bytes -= self._sizes.pop(path, 0)
            else:
                keep.append((first, path))
        self._segments = keep

    def close(self) -> None:
        with self._lock:
            if self._closed.is_set():
                return
            self._closed.set()
            os.fsync(self._fd)
            os.close(self._fd)
        if self._syncer is not None:
            self._syncer.join(timeout=5)
        fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        os.close(self._lock_fd)


class SpoolCursor:
    """Reads a spool's entries in order from a sequence number on, following appends and new segments."""

    def __init__(self, spool: Spool, after_seq: int) -> None:
        self.spool = spool
        self.seq = after_seq  # the last number handed out
        segs, _ = spool._view()
        firsts = [f for f, _ in segs]
        self._first = firsts[max(0, bisect_right(firsts, after_seq + 1) - 1)] if segs else after_seq + 1
        self._pos = 0

    def read(self, max_bytes: int = 4 << 20) -> list[Entry]:
        """The next whole entries (about ``max_bytes`` of them); [] when none is written yet."""
        segs, sizes = self.spool._view()
        out: list[Entry] = []
        for first, path in segs:
            if first < self._first:
                continue
            if first > self._first:
                self._first, self._pos = first, 0
            size = sizes[path]
            if self._pos < size:
                try:
                    with open(path, "rb") as f:
                        f.seek(self._pos)
                        data = f.read(min(size - self._pos, max(max_bytes, 1 << 16)))
                except FileNotFoundError:  # all delivered and deleted meanwhile: go on with the next
                    continue
                pairs = list(iter_entries(data, verify=False))  # written by this process: whole entries
                if not pairs:  # an entry larger than the read: take it whole
                    with open(path, "rb") as f:
                        f.seek(self._pos)
                        pairs = list(iter_entries(f.read(size - self._pos), verify=False))
                limit = self.spool.durable_seq
                start = self._pos
                for e, end in pairs:
                    if e.last_seq > limit:
                        return out
                    self._pos = start + end
                    if e.last_seq > self.seq:
                        out.append(e)
                        self.seq = e.last_seq
                if out:
                    return out
        return out
