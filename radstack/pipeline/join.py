"""The RADStack join: impressions ⋈ clicks on ``impression_id``, emitting ONE event per impression
with ``is_clicked`` (1 when a click for it arrived, else 0).

Spec (``processing.joins`` entry, ``type: stream``)::

    {name: clicks, type: stream, topic: clicks, on: impression_id, eventId: click_id,
     timestampColumn: timestamp, window: PT2M, flag: is_clicked}

* Stream (:func:`join_streaming`): clicks are parsed, deduplicated on their event id within the
  watermark, and left-outer-joined to the impressions on the key with the time bound
  ``impression time <= click time <= impression time + window``; both sides carry watermarks, so
  Spark keeps bounded state. A clicked impression is emitted as soon as its click arrives; an
  unclicked one once the watermark passes ``impression time + window`` (it waits that long).
* Batch (:func:`join_batch`): clicks deduplicated exactly, reduced to the set of clicked keys
  (within the same window), then a left join: the exact answer, no watermark.

Clicks are assumed to be at most one per impression after dedup (as the ``ads`` generator emits);
several clicks still give one impression row, in batch and stream alike (batch: distinct keys;
stream: the click side is deduplicated on the join key too).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from radstack.pipeline.dedup import (
    ENTERED_METRIC_PREFIX,
    EVENT_TS,
    PASSED_METRIC_PREFIX,
    count_rows,
    dedup_exact,
)
from radstack.pipeline.parse import parse_events, q, valid_events
from radstack.pipeline.window import window_millis
from radstack.spec import (
    TIME_COLUMN,
    DataSchema,
    DatasourceSpec,
    DimensionSchema,
    ProcessingSpec,
    TimestampSpec,
)
from radstack.time.intervals import Period

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["join_spec_for", "join_window_ms", "parse_joined", "join_batch", "join_streaming"]

_C_TIME = "__c_time"
_C_TS = "__c_event_ts"
_C_KEY = "__c_key"


def join_spec_for(j: Mapping[str, Any]) -> DatasourceSpec:
    """A minimal datasource spec that parses the joined topic (key + event id + timestamp)."""
    on = str(j["on"])
    ts = TimestampSpec(column=str(j.get("timestampColumn", "timestamp")), format=str(j.get("timestampFormat", "auto")))
    schema = DataSchema(data_source=str(j["name"]), timestamp_spec=ts, dimensions=(DimensionSchema(on),))
    return DatasourceSpec(schema, ProcessingSpec(topics=(str(j.get("topic", j["name"])),), event_id=j.get("eventId")))


def join_window_ms(j: Mapping[str, Any]) -> int:
    return window_millis(Period.parse(str(j.get("window", "PT2M"))))


def parse_joined(raw: DataFrame, j: Mapping[str, Any], *, value_col: str = "value") -> DataFrame:
    """The joined topic parsed (all rows, dead letters included, ``__reason`` set)."""
    return parse_events(raw, join_spec_for(j), value_col=value_col)


def _clicks_side(valid: DataFrame, j: Mapping[str, Any]) -> DataFrame:
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    return valid.select(F.col(q(str(j["on"]))).alias(_C_KEY), F.col(TIME_COLUMN).alias(_C_TIME))


def join_batch(left: DataFrame, raw_other: DataFrame, j: Mapping[str, Any], *, value_col: str = "value") -> DataFrame:
    """Exact: ``left`` (valid, deduplicated impressions) with ``is_clicked`` from all of ``raw_other``."""
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    spec = join_spec_for(j)
    clicks = dedup_exact(valid_events(parse_joined(raw_other, j, value_col=value_col)), spec.processing.event_id)
    c = _clicks_side(clicks, j)
    on, flag, w = str(j["on"]), str(j.get("flag", "is_clicked")), join_window_ms(j)
    cond = (
        (F.col(q(on)) == F.col(_C_KEY))
        & (F.col(_C_TIME) >= F.col(TIME_COLUMN))
        & (F.col(_C_TIME) <= F.col(TIME_COLUMN) + F.lit(w))
    )
    matched = left.alias("l").join(c, cond, "left_semi").select(F.col(q(on)).alias(_C_KEY)).distinct()
    out = left.join(matched, left[q(on)] == matched[_C_KEY], "left")
    return out.select(
        *[left[q(c_)] for c_ in left.columns],
        F.when(F.col(_C_KEY).isNotNull(), F.lit(1)).otherwise(F.lit(0)).cast("bigint").alias(flag),
    )


def join_streaming(left: DataFrame, parsed_other: DataFrame, j: Mapping[str, Any], delay: str) -> DataFrame:
    """Bounded stream-stream left outer join. ``left``: valid impressions with ``__event_ts`` and a
    watermark; ``parsed_other``: :func:`parse_joined` of the clicks stream. ``delay``: the watermark
    delay for the clicks side. The clicks entering and getting past their dedup are counted as
    ``join_<name>`` (:func:`radstack.pipeline.dedup.count_rows`)."""
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    clicks = valid_events(parsed_other)
    on, flag, w = str(j["on"]), str(j.get("flag", "is_clicked")), join_window_ms(j)
    # One click per impression is all `is_clicked` needs: dedup the click side on the join key
    # (this also drops re-sent clicks, whatever their click id).
    c = (
        clicks.select(F.col(q(on)).alias(_C_KEY), F.col(TIME_COLUMN).alias(_C_TIME))
        .withColumn(_C_TS, F.timestamp_millis(F.col(_C_TIME)))
        .withWatermark(_C_TS, delay)
    )
    counted = f"join_{j['name']}"
    c = count_rows(count_rows(c, ENTERED_METRIC_PREFIX + counted).dropDuplicatesWithinWatermark([_C_KEY]),
                   PASSED_METRIC_PREFIX + counted)
    cond = F.expr(
        f"{q(on)} = {_C_KEY} AND {_C_TS} >= {EVENT_TS} AND {_C_TS} <= {EVENT_TS} + INTERVAL {w} MILLISECONDS"
    )
    joined = left.join(c, cond, "leftOuter")
    return joined.select(
        *[F.col(q(x)) for x in left.columns],
        F.when(F.col(_C_KEY).isNotNull(), F.lit(1)).otherwise(F.lit(0)).cast("bigint").alias(flag),
    )
