"""The archiver: the second Kafka consumer, copying raw events into deep storage exactly once,
partitioned by event hour (see :mod:`realtime.archiver.archiver`)."""

from realtime.archiver.archiver import Archiver, ArchiverConfig, ArchiverStats

__all__ = ["Archiver", "ArchiverConfig", "ArchiverStats"]
