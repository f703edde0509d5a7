"""The archiver: the second Kafka consumer, copying raw events into deep storage exactly once,
partitioned by event hour (see :mod:`realtime.archiver.archiver`).

The names below load on first use (PEP 562): ``radctl status`` reads the archiver's settings without
importing the Kafka and deep-storage clients the archiver itself needs."""

from __future__ import annotations

from typing import Any

__all__ = ["Archiver", "ArchiverConfig", "ArchiverStats"]


def __getattr__(name: str) -> Any:
    if name == "ArchiverConfig":
        from realtime.archiver.config import ArchiverConfig  # lazy: see the module docstring

        return ArchiverConfig
    if name in __all__:
        from realtime.archiver import archiver  # lazy: see the module docstring

        return getattr(archiver, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
