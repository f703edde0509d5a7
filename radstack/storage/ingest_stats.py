"""The row stats of one ingestion — Druid's task report ``rowStats`` and its parse exceptions — as one
type for every path: the indexer (the stream, native tasks, compaction), the Spark jobs' results and the
Overlord's live task report (:mod:`serving.overlord.reports` renders it). A task's reader thread and the
API share one object, so changes take its lock.

``thrown_away`` includes ``filtered`` (rows the transformSpec filter rejected), as in Druid; ``processed``
counts input rows that made it into segments. Each kept sample has Druid's ``ParseExceptionReport`` shape:
``input`` (the row's text), ``errorType`` (``unparseable`` | ``processedWithError``), ``details`` and
``timeOfExceptionMillis``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import orjson

from radstack.time.clock import now_millis

INT_MAX = 2**31 - 1  # Druid's "unlimited" for maxParseExceptions
DEFAULT_MAX_SAMPLES = 20
MAX_INPUT_CHARS = 4096  # of a row's text kept in a sample


class MaxParseExceptionsExceeded(RuntimeError):
    """More unparseable rows than ``tuningConfig.maxParseExceptions`` allows."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"Max parse exceptions[{limit}] exceeded")
        self.limit = limit


class AllRowsUnparseable(RuntimeError):
    """Every input row was unparseable: the task fails instead of ending SUCCESS with nothing (Druid
    ends SUCCESS there; radstack says so, docs/ingestion.md)."""

    def __init__(self, unparseable: int, sample: str | None) -> None:
        why = f"; first: {sample}" if sample else ""
        super().__init__(f"all {unparseable} input rows were unparseable{why}")
        self.unparseable = unparseable


def _text(raw: Any) -> str:
    if isinstance(raw, str):
        return raw
    try:
        return orjson.dumps(raw, default=str).decode()
    except TypeError:
        return str(raw)


@dataclass
class IngestStats:
    """Counters and kept samples of one ingestion (see the module docs)."""

    processed: int = 0
    processed_bytes: int = 0
    processed_with_error: int = 0
    unparseable: int = 0
    thrown_away: int = 0
    filtered: int = 0
    samples: list[dict[str, Any]] = field(default_factory=list)
    max_samples: int = DEFAULT_MAX_SAMPLES  # tuningConfig.maxSavedParseExceptions
    max_parse_exceptions: int = INT_MAX  # tuningConfig.maxParseExceptions
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def add_bytes(self, n: int) -> None:
        with self._lock:
            self.processed_bytes += n

    def add_sample(self, raw: Any, reason: str, error_type: str = "unparseable") -> None:
        """Keep one sample (within ``max_samples``) without counting it."""
        with self._lock:
            self._keep(raw, reason, error_type)

    def add_unparseable(self, raw: Any, detail: str, *, check: bool = True) -> None:
        """Count one row that could not be parsed and keep it; raise once past ``max_parse_exceptions``."""
        with self._lock:
            self.unparseable += 1
            self._keep(raw, detail, "unparseable")
        if check:
            self.check()

    def check(self) -> None:
        if self.unparseable > self.max_parse_exceptions:
            raise MaxParseExceptionsExceeded(self.max_parse_exceptions)

    def check_any_parsed(self) -> None:
        """After a whole input: :class:`AllRowsUnparseable` when rows came in and none could be read."""
        if self.unparseable and not (self.processed or self.processed_with_error or self.thrown_away):
            sample = (self.samples[0].get("details") or [None])[0] if self.samples else None
            raise AllRowsUnparseable(self.unparseable, sample)

    def merge(self, other: IngestStats) -> IngestStats:
        """Add ``other`` into this one (samples stay within ``max_samples``); returns self."""
        with other._lock:
            counts = (other.processed, other.processed_bytes, other.processed_with_error, other.unparseable,
                      other.thrown_away, other.filtered)
            samples = list(other.samples)
        with self._lock:
            self.processed += counts[0]
            self.processed_bytes += counts[1]
            self.processed_with_error += counts[2]
            self.unparseable += counts[3]
            self.thrown_away += counts[4]
            self.filtered += counts[5]
            self.samples += samples[: max(0, self.max_samples - len(self.samples))]
        return self

    def row_stats(self, *, with_filtered: bool = False) -> dict[str, int]:
        """The ``rowStats.buildSegments`` object of Druid's ingestion task report (``filtered`` apart too
        with ``with_filtered``: radstack's own job reports)."""
        with self._lock:
            out = {
                "processed": self.processed,
                "processedBytes": self.processed_bytes,
                "processedWithError": self.processed_with_error,
                "thrownAway": self.thrown_away,
                "unparseable": self.unparseable,
            }
            if with_filtered:
                out["filtered"] = self.filtered
            return out

    def kept_samples(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.samples)

    def _keep(self, raw: Any, detail: str, error_type: str) -> None:
        if len(self.samples) >= self.max_samples:
            return
        self.samples.append({
            "input": _text(raw)[:MAX_INPUT_CHARS],
            "errorType": error_type,
            "details": [detail],
            "timeOfExceptionMillis": now_millis(),
        })
