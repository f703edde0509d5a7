"""The streaming query's ``foreachBatch``: one micro-batch → dead letters, real-time segments and
ONE metadata transaction.

Per batch ``(query id, batch id)``:

1. if the committed state ``streaming.<ds>`` already records this query's batch id (a replay after a
   crash between publish and Spark's own commit), the batch is skipped — Spark replays a batch with
   the same offsets, so what it would write is already published;
2. one aggregation over the (persisted) batch: rows, invalid rows, late rows (``__time`` below
   ``watermark − windowPeriod``, the watermark being the highest event time of earlier batches),
   the newest event time and the last offset per topic-partition;
3. invalid rows → ``<topic>.dlq``;
4. valid, in-window rows → :func:`radstack.pipeline.batch.finish_pipeline` → the shared indexer one
   Arrow partition at a time (:func:`radstack.pipeline.segments.index_dataframe`), version = the
   interval start, ``numbered`` partitions after the highest existing number of that version;
5. publish the segments together with the new state (batch id, watermark, offsets, counters) in one
   transaction; then, at most every ``handoff_check_seconds``, hand off closed intervals.

A crash before step 5 leaves only unreferenced files (overwritten by the replay, which writes the
same partition numbers); a crash after it is covered by step 1.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from radstack.intervals import Interval, format_instant
from radstack.pipeline.batch import finish_pipeline
from radstack.pipeline.parse import (
    OFFSET_COLUMN,
    PARTITION_COLUMN,
    REASON_COLUMN,
    TOPIC_COLUMN,
    dead_letters,
    valid_events,
)
from radstack.pipeline.segments import index_dataframe, interval_start_version
from radstack.pipeline.window import drop_late, is_late, late_threshold
from radstack.spec import TIME_COLUMN, DatasourceSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from serving.metadata import MetadataStore

log = logging.getLogger("radstack.streaming")

__all__ = ["state_key", "progress_key", "SinkConfig", "SegmentSink", "COUNTERS", "CRASH_ENV"]

COUNTERS = ("input", "processed", "thrownAway", "late", "filtered", "unparseable", "deadLettered", "segments", "batches")
#: test hook: ``<batch id>`` → the process exits right after publishing that batch, before Spark
#: commits it (simulates a crash in the worst place)
CRASH_ENV = "RADSTACK_STREAM_CRASH_AFTER_PUBLISH"


def state_key(data_source: str) -> str:
    return f"streaming.{data_source}"


def progress_key(data_source: str) -> str:
    return f"streaming.{data_source}.progress"


@dataclass
class SinkConfig:
    bootstrap_servers: str
    deep_storage: dict[str, Any]
    checkpoint: Path
    window_ms: int
    handoff_check_seconds: float = 10.0
    handoff: bool = True
    #: the sink's own window-period filter; off for specs with a stream join, whose rows leave the
    #: join up to (join window + watermark delay) after their time — Spark's watermark drops late
    #: input there
    late_filter: bool = True
    #: how far behind the watermark (of the batch before) an interval's end must be for handoff
    handoff_window_ms: int | None = None


@dataclass
class SegmentSink:
    spec: DatasourceSpec
    metadata: MetadataStore
    config: SinkConfig
    on_batch: Callable[[dict[str, Any]], None] | None = None
    skipped: list[int] = field(default_factory=list)
    _last_handoff: float = 0.0
    _query_id: str | None = None

    @property
    def key(self) -> str:
        return state_key(self.spec.name)

    def query_id(self) -> str:
        """The streaming query's id, which Spark keeps in the checkpoint across restarts."""
        if self._query_id is None:
            meta = self.config.checkpoint / "metadata"
            self._query_id = str(json.loads(meta.read_text().splitlines()[0])["id"])
        return self._query_id

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        t0 = time.monotonic()
        state = dict(self.metadata.get_state(self.key) or {})
        qid = self.query_id()
        if state.get("queryId") == qid and int(state.get("lastBatchId", -1)) >= batch_id:
            log.warning("batch %s of query %s is already published: skipped (replay)", batch_id, qid)
            self.skipped.append(batch_id)
            return
        if state.get("queryId") != qid:
            state.update(queryId=qid, lastBatchId=-1)
        counters = {c: int((state.get("counters") or {}).get(c, 0)) for c in COUNTERS}
        watermark = state.get("watermarkMs")
        threshold = late_threshold(watermark, self.config.window_ms) if self.config.late_filter else None
        prev_watermark = watermark

        df = df.persist()
        timings: dict[str, int] = {}

        def lap(name: str, t: list[float] = [t0]) -> None:  # noqa: B006 - a per-call stopwatch
            now = time.monotonic()
            timings[name] = int((now - t[0]) * 1000)
            t[0] = now

        try:
            summary = self._summarize(df, threshold)
            lap("summarize")
            counters["input"] += summary["rows"]
            counters["unparseable"] += summary["invalid"]
            counters["late"] += summary["late"]
            if summary["invalid"]:
                from realtime.streaming.dlq import write_dead_letters

                write_dead_letters(dead_letters(df), self.spec, self.config.bootstrap_servers)
                counters["deadLettered"] += summary["invalid"]
            segments: list[Any] = []
            processed = 0
            in_window = summary["rows"] - summary["invalid"] - summary["late"]
            if in_window:
                rows = finish_pipeline(drop_late(valid_events(df), threshold), self.spec, df.sparkSession)
                base = self._base_offsets(summary["minTime"], summary["maxTime"])
                res = index_dataframe(
                    rows,
                    self.spec.data_schema,
                    deep_storage_config=self.config.deep_storage,
                    version=interval_start_version,
                    shard="append",
                    base_offsets=base,
                )
                segments = res.segments
                processed = res.stats.processed
                lap("index")
                filtered = in_window - processed - res.stats.unparseable
                counters["filtered"] += max(filtered, 0) + res.stats.thrown_away
                counters["unparseable"] += res.stats.unparseable
            counters["processed"] += processed
            counters["thrownAway"] = counters["late"] + counters["filtered"]
            counters["segments"] += len(segments)
            counters["batches"] += 1
            new_wm = summary["maxValidTime"]
            if new_wm is not None and (watermark is None or new_wm > watermark):
                watermark = new_wm
            offsets = dict(state.get("offsets") or {})
            for (topic, part), off in summary["offsets"].items():
                offsets.setdefault(topic, {})[str(part)] = off + 1
            duration = int((time.monotonic() - t0) * 1000)
            state.update(
                dataSource=self.spec.name,
                queryId=qid,
                lastBatchId=batch_id,
                watermarkMs=watermark,
                watermark=format_instant(watermark) if watermark is not None else None,
                prevWatermarkMs=prev_watermark,
                offsets=offsets,
                counters=counters,
                lastBatch={
                    "batchId": batch_id,
                    "rows": summary["rows"],
                    "processed": processed,
                    "segments": len(segments),
                    "durationMs": duration,
                    "timingsMs": timings,
                    "publishedAt": format_instant(time.time_ns() // 1_000_000),
                },
            )
            from serving.deep_storage import open_deep_storage
            from serving.publish import publish

            publish(self.metadata, open_deep_storage(self.config.deep_storage), segments, state={self.key: state})
            lap("publish")
            log.info("batch %s: %d rows, %d segments, %s ms", batch_id, summary["rows"], len(segments), timings)
        finally:
            df.unpersist()
        if os.environ.get(CRASH_ENV) == str(batch_id):
            log.error("%s=%s: exiting right after the publish (test hook)", CRASH_ENV, batch_id)
            logging.shutdown()
            os._exit(86)
        if self.on_batch is not None:
            self.on_batch(state)
        if self.config.handoff and time.monotonic() - self._last_handoff >= self.config.handoff_check_seconds:
            self._last_handoff = time.monotonic()
            # rows of this batch were admitted/emitted against the watermark of the batch before
            self.run_handoff(prev_watermark)

    def run_handoff(self, watermark: int | None) -> list[Interval]:
        from realtime.streaming.handoff import handoff_closed_intervals
        from serving.deep_storage import open_deep_storage

        try:
            return handoff_closed_intervals(
                self.metadata,
                open_deep_storage(self.config.deep_storage),
                self.spec,
                watermark_ms=watermark,
                window_ms=self.config.handoff_window_ms or self.config.window_ms,
            )
        except Exception:  # handoff is an optimisation: never fail the stream over it
            log.exception("handoff failed; will retry")
            return []

    def _summarize(self, df: DataFrame, threshold: int | None) -> dict[str, Any]:
        from pyspark.sql import functions as F

        valid = F.col(REASON_COLUMN).isNull()
        late = valid & is_late(threshold)
        ok = valid & ~is_late(threshold)
        rows = (
            df.groupBy(TOPIC_COLUMN, PARTITION_COLUMN)
            .agg(
                F.count(F.lit(1)).alias("n"),
                F.sum(F.when(~valid, 1).otherwise(0)).alias("invalid"),
                F.sum(F.when(late, 1).otherwise(0)).alias("late"),
                F.max(OFFSET_COLUMN).alias("off"),
                F.max(F.when(valid, F.col(TIME_COLUMN))).alias("maxValid"),
                F.min(F.when(ok, F.col(TIME_COLUMN))).alias("minOk"),
                F.max(F.when(ok, F.col(TIME_COLUMN))).alias("maxOk"),
            )
            .collect()
        )

        def _agg(values: list[Any], fn: Callable[..., Any]) -> Any:
            vals = [v for v in values if v is not None]
            return fn(vals) if vals else None

        return {
            "rows": sum(int(r["n"]) for r in rows),
            "invalid": sum(int(r["invalid"] or 0) for r in rows),
            "late": sum(int(r["late"] or 0) for r in rows),
            "offsets": {(r[TOPIC_COLUMN], r[PARTITION_COLUMN]): int(r["off"]) for r in rows if r["off"] is not None},
            "maxValidTime": _agg([r["maxValid"] for r in rows], max),
            "minTime": _agg([r["minOk"] for r in rows], min),
            "maxTime": _agg([r["maxOk"] for r in rows], max),
        }

    def _base_offsets(self, lo: int | None, hi: int | None) -> dict[tuple[Interval, str], int]:
        """(interval, version) → the next free partition number, from every segment (used or not)."""
        gran = self.spec.data_schema.segment_granularity
        window: Interval | None = None
        has_time_transform = any(t.name == TIME_COLUMN for t in self.spec.data_schema.transforms)
        if lo is not None and hi is not None and not has_time_transform and not gran.is_all:
            window = Interval(gran.bucket_start(lo), gran.next_start(gran.bucket_start(hi)))
        out: dict[tuple[Interval, str], int] = {}
        for seg in self.metadata.segments(self.spec.name, used=None, interval=window):
            k = (seg.interval, seg.version)
            out[k] = max(out.get(k, 0), seg.partition_num + 1)
        return out
