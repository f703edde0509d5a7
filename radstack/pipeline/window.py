"""Druid's ``windowPeriod`` for the real-time path.

The watermark is the highest event time seen in *earlier* micro-batches (kept in the job's committed
state, so a replayed batch sees the same value). An event older than ``watermark − windowPeriod`` is
thrown away (counted as ``thrownAway``): its interval may already be handed off, and the batch layer
will rebuild it from the archive anyway. An interval ``[start, end)`` is closed once
``end + windowPeriod <= watermark``: no event of it can be accepted any more, so handoff may merge it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from radstack.spec import TIME_COLUMN
from radstack.time.intervals import Interval, Period

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

__all__ = ["window_millis", "spark_delay", "late_threshold", "is_late", "late_mask", "drop_late", "interval_closed"]


def window_millis(period: Period) -> int:
    """The window period in millis (months and years at 31 and 366 days: never too short)."""
    return period.fixed_millis + (period.years * 366 + period.months * 31) * 86_400_000


def spark_delay(period: Period) -> str:
    """A Spark watermark delay string for the window period."""
    return f"{max(window_millis(period), 0)} milliseconds"


def late_threshold(watermark_ms: int | None, window_ms: int) -> int | None:
    """Events with ``__time`` below this are thrown away (None: nothing is late yet)."""
    return None if watermark_ms is None else watermark_ms - window_ms


def is_late(threshold_ms: int | None) -> Column:
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    if threshold_ms is None:
        return F.lit(False)
    return F.coalesce(F.col(TIME_COLUMN) < F.lit(threshold_ms), F.lit(False))


def late_mask(times: pa.ChunkedArray | pa.Array, threshold_ms: int | None) -> pa.Array | pa.ChunkedArray:
    """:func:`is_late` on an Arrow column of ``__time`` millis (the streaming sink's one pass): True
    where the row is late, False elsewhere (NULL times included)."""

    if threshold_ms is None:
        return pa.array([False] * len(times), pa.bool_())
    return pc.fill_null(pc.less(times, pa.scalar(threshold_ms, times.type)), False)


def drop_late(df: DataFrame, threshold_ms: int | None) -> DataFrame:
    """The rows that are not late."""
    return df if threshold_ms is None else df.where(~is_late(threshold_ms))


def interval_closed(interval: Interval, watermark_ms: int | None, window_ms: int) -> bool:
    return watermark_ms is not None and interval.end + window_ms <= watermark_ms
