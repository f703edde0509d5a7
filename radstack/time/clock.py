"""The current time, in epoch milliseconds: the one clock every layer reads (tests pass ``now_ms``
explicitly instead of patching it)."""

from __future__ import annotations

import time

__all__ = ["now_millis"]


def now_millis() -> int:
    """Milliseconds since the epoch, UTC (Druid's instant unit)."""
    return time.time_ns() // 1_000_000
