"""The streaming query's ``foreachBatch``: one micro-batch → dead letters, real-time segments and
ONE metadata transaction.

Per batch ``(query id, batch id)``:

1. if the committed state ``streaming.<ds>`` already records this query's batch id (a replay after a
   crash between publish and Spark's own commit), the batch is skipped — Spark replays a batch with
   the same offsets, so what it would write is already published;
2. :func:`radstack.pipeline.batch.finish_pipeline` in its marking form (nothing dropped, rejected
   rows flagged) and then ONE pass over the batch (:mod:`realtime.streaming.micro_batch`): it
   counts rows, invalid rows and late rows (``__time`` below ``watermark − windowPeriod``, the
   watermark being the highest event time of earlier batches), produces invalid rows to
   ``<topic>.dlq``, and indexes the valid, in-window rows one Arrow partition at a time with the
   shared indexer — version = the interval start, ``numbered`` append partitions numbered from the
   partition cursor in the committed state;
3. publish the segments together with the new state (batch id, watermark, offsets, counters, the
   next partition number) in one transaction; then, at most every ``handoff_check_seconds``, hand
   off closed intervals.

A crash before step 3 leaves only unreferenced files (overwritten by the replay, which writes the
same partition numbers); a crash after it is covered by step 1. The micro-batch is computed once: there is no cached copy and no
second Spark job over it.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from radstack.pipeline.batch import finish_pipeline
from radstack.pipeline.window import late_threshold
from radstack.spec import DatasourceSpec
from radstack.storage.deep_storage import open_deep_storage
from radstack.storage.publish import publish
from radstack.storage.replicas import partition_range, progress_key, state_key
from radstack.time.clock import now_millis
from radstack.time.intervals import Interval, format_instant
from realtime.streaming.batch_errors import interrupted, short_error
from realtime.streaming.handoff import handoff_closed_intervals
from realtime.streaming.micro_batch import BOOKKEEPING, KEEP_COLUMN, process_micro_batch

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from radstack.storage.metadata import MetadataStore

log = logging.getLogger("radstack.streaming")

__all__ = ["state_key", "progress_key", "SinkConfig", "SegmentSink", "COUNTERS", "CRASH_ENV", "PARTITION_WRAP"]

COUNTERS = ("input", "processed", "thrownAway", "late", "filtered", "unparseable", "deadLettered", "segments", "batches",
            "processedTopic")
#: test hook: ``<batch id>`` → the process exits right after publishing that batch, before Spark
#: commits it (simulates a crash in the worst place)
CRASH_ENV = "RADSTACK_STREAM_CRASH_AFTER_PUBLISH"
#: the partition cursor of replica 0 starts again at 0 here (far below Druid's int limit; an interval
#: stays open for minutes or hours, so numbers handed out 2^30 partitions ago belong to long-closed
#: intervals); other replicas wrap inside their own range (radstack.storage.replicas.partition_range)
PARTITION_WRAP = partition_range(0)[1]


def without_processed_topic(spec: DatasourceSpec) -> DatasourceSpec:
    return replace(spec, processing=replace(spec.processing, processed_topic=None))


@dataclass
class SinkConfig:
    bootstrap_servers: str
    deep_storage: dict[str, Any]
    checkpoint: str  # the query's checkpoint location (a URI: file:, hdfs:)
    window_ms: int
    handoff_check_seconds: float = 10.0
    handoff: bool = True
    #: the sink's own window-period filter; off for specs with a stream join, whose rows leave the
    #: join up to (join window + watermark delay) after their time — Spark's watermark drops late
    #: input there
    late_filter: bool = True
    #: how far behind the watermark (of the batch before) an interval's end must be for handoff
    handoff_window_ms: int | None = None
    #: partition numbers one Spark partition may use per interval (pieces of > maxRowsPerSegment rows)
    partition_stride: int = 1
    #: which real-time replica this job is (radstack/storage/replicas.py): its state key, its partition numbers
    replica: int = 0


@dataclass
class SegmentSink:
    spec: DatasourceSpec
    metadata: MetadataStore
    config: SinkConfig
    on_batch: Callable[[dict[str, Any]], None] | None = None
    skipped: list[int] = field(default_factory=list)
    _last_handoff: float = 0.0
    _query_id: str | None = None
    #: the batch the sink is working on (None between batches)
    running_batch: int | None = None

    @property
    def key(self) -> str:
        return state_key(self.spec.name, self.config.replica)

    def query_id(self, spark: Any) -> str:
        """The streaming query's id, which Spark keeps in the checkpoint's ``metadata`` file across
        restarts (read through Spark, so a checkpoint on HDFS is read where it is)."""
        if self._query_id is None:
            location = f"{self.config.checkpoint.rstrip('/')}/metadata"
            if location.startswith("file:"):
                first = Path(urlparse(location).path).read_text().splitlines()[0]
            else:
                first = spark.read.text(location).first()[0]
            self._query_id = str(json.loads(first)["id"])
        return self._query_id

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        """One micro-batch. A failure reaches Spark as one short line (realtime/streaming/batch_errors.py:
        the whole error would overflow the stream thread's stack); the full error is logged here."""
        self.running_batch = batch_id
        try:
            self._process_batch(df, batch_id)
        except Exception as e:
            if interrupted(e):
                log.info("micro-batch %s interrupted (the query is stopping); it is redone on restart", batch_id)
            else:
                log.exception("micro-batch %s failed", batch_id)
            raise short_error(e, batch_id) from None
        finally:
            self.running_batch = None

    def _process_batch(self, df: DataFrame, batch_id: int) -> None:
        from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

        t0 = time.monotonic()
        state = dict(self.metadata.get_state(self.key) or {})
        qid = self.query_id(df.sparkSession)
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
        first_partition = self._partition_cursor(state)

        marked = finish_pipeline(
            df.withColumn(KEEP_COLUMN, F.lit(True)), self.spec, df.sparkSession, mark=KEEP_COLUMN, keep=BOOKKEEPING
        )
        out = process_micro_batch(
            marked,
            # one writer of the processed topic: replica 0 (the others would repeat every row)
            self.spec if self.config.replica == 0 else without_processed_topic(self.spec),
            threshold_ms=threshold,
            deep_storage_config=self.config.deep_storage,
            bootstrap_servers=self.config.bootstrap_servers,
            first_partition=first_partition,
            stride=self.config.partition_stride,
        )
        t1 = time.monotonic()
        timings = {"process": int((t1 - t0) * 1000)}
        st = out.stats
        processed = st.processed if st else 0
        counters["input"] += out.rows
        counters["unparseable"] += out.invalid + (st.unparseable if st else 0)
        counters["late"] += out.late
        counters["deadLettered"] += out.dead_lettered
        counters["processedTopic"] += out.processed_topic
        if st is not None:
            # rejected by the transforms/filter in Spark or by the indexer, not processed
            counters["filtered"] += max(out.in_window - processed - st.unparseable, 0) + st.thrown_away
        counters["processed"] += processed
        counters["thrownAway"] = counters["late"] + counters["filtered"]
        counters["segments"] += len(out.segments)
        counters["batches"] += 1
        if out.max_valid_time is not None and (watermark is None or out.max_valid_time > watermark):
            watermark = out.max_valid_time
        offsets = dict(state.get("offsets") or {})
        for (topic, part), off in out.offsets.items():
            offsets.setdefault(topic, {})[str(part)] = off + 1
        if out.segments:
            nxt = max(seg.partition_num for seg in out.segments) + 1
            lo, hi = partition_range(self.config.replica)
            state["nextPartitionNum"] = lo if nxt >= hi else nxt
        else:
            state["nextPartitionNum"] = first_partition
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
                "rows": out.rows,
                "processed": processed,
                "segments": len(out.segments),
                "durationMs": duration,
                "timingsMs": timings,
                "publishedAt": format_instant(now_millis()),
            },
        )

        publish(self.metadata, open_deep_storage(self.config.deep_storage), out.segments, state={self.key: state})
        timings["publish"] = int((time.monotonic() - t1) * 1000)
        log.info("batch %s: %d rows, %d segments, %s ms", batch_id, out.rows, len(out.segments), timings)
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

    def _partition_cursor(self, state: dict[str, Any]) -> int:
        """The first partition number this batch may use: kept in the committed state (so a replay
        reuses the same numbers and overwrites its own unpublished files); on the first batch of a
        datasource, one past the highest number any of its segments has."""
        if "nextPartitionNum" in state:
            return int(state["nextPartitionNum"])
        lo, hi = partition_range(self.config.replica)
        nums = [seg.partition_num for seg in self.metadata.segments(self.spec.name, used=None)]
        return max((n for n in nums if lo <= n < hi), default=lo - 1) + 1

    def run_handoff(self, watermark: int | None) -> list[Interval]:

        try:
            return handoff_closed_intervals(
                self.metadata,
                open_deep_storage(self.config.deep_storage),
                self.spec,
                watermark_ms=watermark,
                window_ms=self.config.handoff_window_ms or self.config.window_ms,
                replica=self.config.replica,
            )
        except Exception:  # handoff is an optimisation: never fail the stream over it
            log.exception("handoff failed; will retry")
            return []
