"""The pipeline end to end, in the form each runner needs.

* :func:`finish_pipeline` — transforms + filter, enrichment, and the projection to what the indexer
  reads; both runners call it on deduplicated (and joined) valid rows.
* :func:`run_batch_pipeline` — the exact form the batch layer runs over raw events: parse, exact
  dedup on the event id, the full join, then :func:`finish_pipeline`. No window period: batch fixes
  late events.
* :func:`batch_rows` — the same for the batch rebuild, which leaves the dedup of a spec without
  joins to the rollup's one shuffle (:func:`radstack.pipeline.rollup.rollup_rows`) and keeps each
  event's size for the ``processedBytes`` stat.
* The streaming job (``realtime.streaming``) runs parse → dedup within the watermark → bounded join
  in the stream, and window period → :func:`finish_pipeline` per micro-batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from radstack.expressions import required_columns
from radstack.pipeline.dedup import dedup_exact
from radstack.pipeline.enrich import enrich
from radstack.pipeline.input_schema import join_options
from radstack.pipeline.join import join_batch
from radstack.pipeline.parse import BYTES_COLUMN, parse_events, q, valid_events
from radstack.pipeline.transform import transform_and_filter
from radstack.spec import TIME_COLUMN, DatasourceSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["output_columns", "finish_pipeline", "run_batch_pipeline", "BatchRows", "batch_rows"]


def output_columns(spec: DatasourceSpec, available: list[str]) -> list[str]:
    """``__time``, the dimensions and the metrics' input columns present in ``available``."""

    ds = spec.data_schema
    want = [TIME_COLUMN, *ds.dimension_names]
    for m in ds.metrics:
        if m.field_name:
            want.append(m.field_name)
        if m.expression:
            want += sorted(required_columns(m.expression))
    seen: dict[str, None] = {}
    for c in want:
        if c in available:
            seen.setdefault(c, None)
    return list(seen)


def finish_pipeline(
    df: DataFrame,
    spec: DatasourceSpec,
    spark: SparkSession | None = None,
    *,
    mark: str | None = None,
    keep: tuple[str, ...] = (),
) -> DataFrame:
    """Transforms + filter, enrichment, then only the columns the indexer reads (plus ``keep``).

    With ``mark`` (a boolean column of ``df``) no row is dropped: the rows the transforms or the
    filter reject get ``mark = false``, and ``mark`` is kept — the streaming sink's one-pass form,
    where dead letters ride along with the valid rows."""

    out = enrich(transform_and_filter(df, spec, mark=mark), spec, spark or df.sparkSession)
    extra = [c for c in (*keep, *([mark] if mark else [])) if c in out.columns]
    cols = [c for c in output_columns(spec, out.columns) if c not in extra]
    return out.select(*[q(c) for c in (*cols, *extra)])


def _batch_pipeline(
    spark: SparkSession,
    raw_df: DataFrame,
    spec: DatasourceSpec,
    *,
    value_col: str,
    joined: dict[str, DataFrame] | None,
    defer_dedup: bool,
) -> tuple[DataFrame, str | None]:
    """Parse, exact dedup, the full joins, :func:`finish_pipeline`. With ``defer_dedup`` and no join
    to run, the dedup is left to the caller: the event id and ``__bytes`` stay in the rows and the
    id's column name is returned (None: every event is already unique)."""

    # no dead letters kept here: the faster JSON reader, without the raw bytes and Kafka coordinates
    valid = valid_events(parse_events(raw_df, spec, value_col=value_col, sizes=defer_dedup, keep_raw=False))
    joins = [(j, (joined or {}).get(str(j["name"]))) for j in join_options(spec)]
    joins = [(j, other) for j, other in joins if other is not None]
    pending = spec.processing.event_id if defer_dedup and not joins else None
    if pending is None:  # a join needs unique events on both sides
        valid = dedup_exact(valid, spec.processing.event_id)
    for j, other in joins:
        valid = join_batch(valid, other, j, value_col=value_col)
    keep = (BYTES_COLUMN, *([pending] if pending else [])) if defer_dedup else ()
    return finish_pipeline(valid, spec, spark, keep=keep), pending


def run_batch_pipeline(
    spark: SparkSession,
    raw_df: DataFrame,
    spec: DatasourceSpec,
    *,
    value_col: str = "value",
    joined: dict[str, DataFrame] | None = None,
) -> DataFrame:
    """Raw events (a ``value`` column of JSON bytes/strings, e.g. the raw archive or a Kafka batch
    read) → pipeline rows ready for :func:`radstack.pipeline.indexing.index_dataframe`.

    ``joined``: for each stream join of the spec (``processing.joins`` with ``type: stream``), the
    raw DataFrame of the joined topic by join name (e.g. ``{"clicks": raw_clicks}``); the full join
    (no window) runs when it is given."""

    return _batch_pipeline(spark, raw_df, spec, value_col=value_col, joined=joined, defer_dedup=False)[0]


@dataclass
class BatchRows:
    """Pipeline rows of a batch job; ``dedup_key``: the column whose repeats are still to be dropped
    (None when every event is already unique)."""

    rows: DataFrame
    dedup_key: str | None


def batch_rows(
    spark: SparkSession,
    raw_df: DataFrame,
    spec: DatasourceSpec,
    *,
    value_col: str = "value",
    joined: dict[str, DataFrame] | None = None,
) -> BatchRows:
    """:func:`run_batch_pipeline` for the rebuild: the rows carry ``__bytes`` (each event's size),
    and without a join the exact dedup is left to the caller's shuffle — the event id column is
    kept and named in :attr:`BatchRows.dedup_key`. A spec with a join deduplicates first, as the
    join needs unique events on both sides."""

    return BatchRows(*_batch_pipeline(spark, raw_df, spec, value_col=value_col, joined=joined, defer_dedup=True))
