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

__all__ = ["EVENT_TS", "DEDUP_KEY", "ENTERED_METRIC_PREFIX", "PASSED_METRIC_PREFIX", "with_event_time",
           "count_rows", "dedup_streaming", "dedup_exact"]

EVENT_TS = "__event_ts"
DEDUP_KEY = "__dedup_key"
ENTERED_METRIC_PREFIX = "radstack_entered_"
PASSED_METRIC_PREFIX = "radstack_passed_"
"""Observed metrics (``StreamingQueryProgress.observedMetrics``, field ``rows``) that count, per
micro-batch, the rows entering a dedup step and the rows getting past it. Entered − passed −
duplicates is what the watermark dropped there, which Spark does not always report (Spark 4 filters
rows behind the dedup watermark ahead of the state operator); counting here, not from
``numInputRows``, stays exact when a plan reads a source twice (a stream join splits off its dead
letters)."""


def with_event_time(df: DataFrame) -> DataFrame:
    """Add ``__event_ts`` (TIMESTAMP of ``__time``; NULL for dead letters) for watermarks."""
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    return df.withColumn(EVENT_TS, F.timestamp_millis(F.col(TIME_COLUMN)))


def dedup_streaming(df: DataFrame, event_id: str | None, delay: str, *, count_as: str = "input") -> DataFrame:
    """Watermark ``__event_ts`` by ``delay`` (e.g. ``"10 minutes"``) and, with an event id, drop
    repeats of an id seen within the watermark. The rows entering and getting past are counted as
    the observed metrics ``ENTERED_METRIC_PREFIX + count_as`` and ``PASSED_METRIC_PREFIX + count_as``."""
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    if EVENT_TS not in df.columns:
        df = with_event_time(df)
    df = count_rows(df.withWatermark(EVENT_TS, delay), ENTERED_METRIC_PREFIX + count_as)
    if not event_id:
        return count_rows(df, PASSED_METRIC_PREFIX + count_as)
    has_reason = REASON_COLUMN in df.columns
    unique = F.concat_ws("/", F.lit("#"), F.col(TOPIC_COLUMN), F.col(PARTITION_COLUMN), F.col(OFFSET_COLUMN))
    key = F.col(q(event_id))
    if has_reason:
        key = F.when(F.col(REASON_COLUMN).isNull(), key).otherwise(unique)
    out = df.withColumn(DEDUP_KEY, key).dropDuplicatesWithinWatermark([DEDUP_KEY]).drop(DEDUP_KEY)
    return count_rows(out, PASSED_METRIC_PREFIX + count_as)


def count_rows(df: DataFrame, metric: str) -> DataFrame:
    """``df`` counting its rows of each micro-batch as the observed metric ``metric`` (``rows``)."""
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    return df.observe(metric, F.count(F.lit(1)).alias("rows"))


def dedup_exact(df: DataFrame, event_id: str | None) -> DataFrame:
    """Keep one row per event id over the whole input (batch); the input unchanged without an id."""
    if not event_id:
        return df
    return df.dropDuplicates([event_id])
