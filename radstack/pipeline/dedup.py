"""Dedup on the event id: within the watermark for a stream, exactly for a batch.

The streaming form keys Spark's ``dropDuplicatesWithinWatermark`` on the event id; rows without an
event time (dead letters riding along the same stream) get a unique key from their Kafka coordinates
and pass through (Spark never treats a NULL event time as late). Spark reports what it dropped in the
query progress (``stateOperators[].customMetrics.numDroppedDuplicateRows`` and
``numRowsDroppedByWatermark``), which the job adds to its counters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from radstack.pipeline.parse import OFFSET_COLUMN, PARTITION_COLUMN, REASON_COLUMN, TOPIC_COLUMN, q
from radstack.spec import TIME_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["EVENT_TS", "DEDUP_KEY", "with_event_time", "dedup_streaming", "dedup_exact"]

EVENT_TS = "__event_ts"
DEDUP_KEY = "__dedup_key"


def with_event_time(df: DataFrame) -> DataFrame:
    """Add ``__event_ts`` (TIMESTAMP of ``__time``; NULL for dead letters) for watermarks."""
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    return df.withColumn(EVENT_TS, F.timestamp_millis(F.col(TIME_COLUMN)))


def dedup_streaming(df: DataFrame, event_id: str | None, delay: str) -> DataFrame:
    """Watermark ``__event_ts`` by ``delay`` (e.g. ``"10 minutes"``) and, with an event id, drop
    repeats of an id seen within the watermark."""
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    if EVENT_TS not in df.columns:
        df = with_event_time(df)
    df = df.withWatermark(EVENT_TS, delay)
    if not event_id:
        return df
    has_reason = REASON_COLUMN in df.columns
    unique = F.concat_ws("/", F.lit("#"), F.col(TOPIC_COLUMN), F.col(PARTITION_COLUMN), F.col(OFFSET_COLUMN))
    key = F.col(q(event_id))
    if has_reason:
        key = F.when(F.col(REASON_COLUMN).isNull(), key).otherwise(unique)
    return df.withColumn(DEDUP_KEY, key).dropDuplicatesWithinWatermark([DEDUP_KEY]).drop(DEDUP_KEY)


def dedup_exact(df: DataFrame, event_id: str | None) -> DataFrame:
    """Keep one row per event id over the whole input (batch); the input unchanged without an id."""
    if not event_id:
        return df
    return df.dropDuplicates([event_id])
