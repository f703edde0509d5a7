"""The streaming job: Kafka (Spark's own connector) → pipeline → foreachBatch sink, per datasource.

Plan: ``readStream.format("kafka")`` on the spec's topics (``startingOffsets`` earliest,
``maxOffsetsPerTrigger``, ``failOnDataLoss``) → :func:`radstack.pipeline.parse.parse_events` →
dedup on the event id within the watermark (delay = windowPeriod) → the bounded impressions ⋈ clicks
join when the spec has one → :class:`realtime.streaming.sink.SegmentSink`. The checkpoint lives in
:func:`checkpoint_location` (``$RADSTACK_HOME/checkpoints/<datasource>``, or in HDFS deep storage, where
every host reaches it); a restart resumes from exactly the offsets not committed.

Settings (``streaming.*`` in radstack.yaml, all optional): ``trigger_seconds`` (1.0),
``max_offsets_per_trigger`` (1000000), ``shuffle_partitions`` (0: one per local core), ``fail_on_data_loss`` (true), ``starting_offsets`` (earliest),
``handoff_check_seconds`` (10), ``handoff`` (true), ``progress_seconds`` (1.0).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from radstack.config import Settings
from radstack.druid_cluster.specs import with_processed_topic
from radstack.pipeline import enrich
from radstack.pipeline.dedup import dedup_streaming
from radstack.pipeline.input_schema import join_options
from radstack.pipeline.join import join_streaming, join_window_ms, parse_joined
from radstack.pipeline.parse import RAW_COLUMN, REASON_COLUMN, parse_events
from radstack.pipeline.spark_session import DEFAULT_SHUFFLE_PARTITIONS, build_spark_session
from radstack.pipeline.window import spark_delay, window_millis
from radstack.spec import DatasourceSpec
from radstack.storage.deep_storage import open_deep_storage
from radstack.storage.indexer import DEFAULT_MAX_ROWS_PER_SEGMENT
from radstack.storage.metadata import MetadataStore
from realtime.streaming.dlq import dlq_topics, forget_producer
from realtime.streaming.progress import ProgressTracker, new_progress
from realtime.streaming.sink import SegmentSink, SinkConfig, progress_key
from realtime.topics import ensure_topics

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from radstack.storage.metadata import MetadataStore

__all__ = ["StreamOptions", "stream_options", "checkpoint_location", "delete_checkpoint", "build_stream", "StreamingJob"]

log = logging.getLogger("radstack.streaming")

#: how often an active query's progress state is rewritten even without new batches (health)
HEARTBEAT_SECONDS = 10.0


@dataclass
class StreamOptions:
    available_now: bool = False
    trigger_seconds: float = 1.0
    max_offsets_per_trigger: int = 1_000_000
    fail_on_data_loss: bool = True
    starting_offsets: str = "earliest"
    handoff_check_seconds: float = 10.0
    handoff: bool = True
    progress_seconds: float = 1.0
    bootstrap_servers: str | None = None
    #: the Kafka consumer group prefix (each real-time replica has its own)
    group_id_prefix: str | None = None


def stream_options(settings: Settings, **overrides: Any) -> StreamOptions:
    o = StreamOptions()
    for k in ("trigger_seconds", "max_offsets_per_trigger", "fail_on_data_loss", "starting_offsets",
              "handoff_check_seconds", "handoff", "progress_seconds"):  # fmt: skip
        v = getattr(settings.streaming, k)
        if v is not None:
            setattr(o, k, type(getattr(o, k))(v))
    for k, v in overrides.items():
        if v is not None:
            setattr(o, k, v)
    if o.bootstrap_servers is None:
        o.bootstrap_servers = settings.kafka.clients_bootstrap
    return o


def streaming_shuffle_partitions(settings: Settings) -> int:
    """``streaming.shuffle_partitions``; 0 → one per core of a ``local[N]``/``local[*]`` master (on
    2 cores, 2 partitions moved 43k events/s against 36k with 4), else ``spark.shuffle_partitions``."""


    n = int(settings.streaming.shuffle_partitions or 0)
    if n > 0:
        return n
    master = str(settings.spark.master or "local[*]")
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master)
    if m:
        cores = m.group(1)
        return (os.cpu_count() or 2) if cores in (None, "*") else int(cores)
    return int(settings.spark.shuffle_partitions or DEFAULT_SHUFFLE_PARTITIONS)


def handoff_window_ms(spec: DatasourceSpec) -> int:
    """windowPeriod; with stream joins, + the longest join window + the watermark delay again
    (unmatched rows leave the join that late; the second delay covers the slower input's watermark)."""

    w = window_millis(spec.processing.window_period)
    joins = join_options(spec)
    return w + (max(join_window_ms(j) for j in joins) + w if joins else 0)


def checkpoint_location(settings: Settings, data_source: str, replica: int = 0) -> str:
    """The URI of a streaming query's checkpoint: ``<base>/<datasource>`` (replica 0) or
    ``<base>/<datasource>.replica<r>``. The base is ``streaming.checkpoint_location`` or, when empty,
    ``checkpoints/`` in HDFS deep storage — the state-store files are written by the executors, which
    on a cluster run on other hosts, and a restarted driver may run elsewhere too — else
    ``$RADSTACK_HOME/checkpoints`` (a local directory; S3 has no atomic rename, which Spark's
    checkpoint needs, so S3 deep storage keeps them local unless the setting names shared storage)."""
    name = data_source if replica == 0 else f"{data_source}.replica{replica}"
    base = str(settings.streaming.checkpoint_location or "").rstrip("/")
    if not base and settings.deep_storage.type == "hdfs":
        base = open_deep_storage(settings).uri("checkpoints")
    if not base:
        return (Path(settings.home) / "checkpoints" / name).resolve().as_uri()
    return f"{base}/{name}" if "://" in base else (Path(base) / name).resolve().as_uri()


def delete_checkpoint(spark: SparkSession, location: str) -> bool:
    """Remove a checkpoint wherever it lives (Hadoop's file system of its URI: file:, hdfs:)."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    path = jvm.org.apache.hadoop.fs.Path(location)
    fs = path.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
    return bool(fs.delete(path, True))


def _kafka_stream(spark: SparkSession, topics: list[str], o: StreamOptions, max_offsets: int) -> DataFrame:
    reader = spark.readStream.format("kafka")
    if o.group_id_prefix:
        reader = reader.option("groupIdPrefix", o.group_id_prefix)
    return (
        reader
        .option("kafka.bootstrap.servers", o.bootstrap_servers)
        .option("subscribe", ",".join(topics))
        .option("startingOffsets", o.starting_offsets)
        .option("maxOffsetsPerTrigger", str(max_offsets))
        .option("failOnDataLoss", "true" if o.fail_on_data_loss else "false")
        .option("kafka.fetch.max.wait.ms", "50")
        .load()
    )


def only_dead_letters_keep_bytes(parsed: DataFrame) -> DataFrame:
    """``__raw`` set to NULL on valid rows: only dead letters need their original bytes downstream,
    and the bytes would otherwise ride through the dedup shuffle and into the sink."""
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    return parsed.withColumn(RAW_COLUMN, F.when(F.col(REASON_COLUMN).isNotNull(), F.col(RAW_COLUMN)))


def partition_stride(max_offsets_per_trigger: int, sources: int) -> int:
    """Partition numbers one Spark partition of a micro-batch may need per interval: one segment
    per ``maxRowsPerSegment`` rows, and a batch holds at most ``max_offsets_per_trigger`` rows per
    source."""

    return 1 + max(max_offsets_per_trigger, 1) * max(sources, 1) // DEFAULT_MAX_ROWS_PER_SEGMENT


def build_stream(spark: SparkSession, spec: DatasourceSpec, o: StreamOptions) -> DataFrame:
    """The streaming DataFrame the sink receives: parsed rows (dead letters included, ``__reason``
    set), deduplicated within the watermark, joined when the spec has a stream join."""
    if not spec.processing.topics:
        raise ValueError(f"datasource {spec.name!r} has no processing.topics to stream from")
    delay = spark_delay(spec.processing.window_period)
    joins = join_options(spec)
    raw = _kafka_stream(spark, list(spec.processing.topics), o, o.max_offsets_per_trigger)
    parsed = only_dead_letters_keep_bytes(parse_events(raw, spec))
    if not joins:
        return dedup_streaming(parsed, spec.processing.event_id, delay)

    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    # Dead letters skip the join (they have no event time, so the join could never let them go); they
    # split off before dedup, which then runs once, on the valid rows.
    valid = dedup_streaming(parsed.where(F.col(REASON_COLUMN).isNull()), spec.processing.event_id, delay)
    invalid = parsed.where(F.col(REASON_COLUMN).isNotNull())
    for j in joins:
        other_raw = _kafka_stream(spark, [str(j.get("topic", j["name"]))], o, o.max_offsets_per_trigger)
        other = only_dead_letters_keep_bytes(parse_joined(other_raw, j))
        valid = join_streaming(valid, other, j, delay)
        dead = other.where(F.col(REASON_COLUMN).isNotNull())
        invalid = invalid.unionByName(dead, allowMissingColumns=True)
    return valid.unionByName(invalid, allowMissingColumns=True)


class StreamingJob:
    """One streaming query for one datasource."""

    def __init__(
        self,
        settings: Settings,
        spec: DatasourceSpec,
        options: StreamOptions | None = None,
        *,
        spark: SparkSession | None = None,
        metadata: MetadataStore | None = None,
        replica: int = 0,
    ) -> None:

        self.settings = settings
        self.spec = spec = with_processed_topic(spec, settings.druid)
        self.replica = replica
        self.options = options or stream_options(settings)
        if replica:
            self.options = replace(self.options, group_id_prefix=f"radstack-{spec.name}-replica{replica}")
        self.metadata = metadata or MetadataStore.from_settings(settings)
        self._spark = spark
        self.query: StreamingQuery | None = None
        self.tracker = ProgressTracker.resume(self.metadata.get_state(progress_key(spec.name, replica)))
        self.checkpoint = checkpoint_location(settings, spec.name, replica)
        self.joins = join_options(spec)
        self.sink = SegmentSink(
            spec,
            self.metadata,
            SinkConfig(
                bootstrap_servers=str(self.options.bootstrap_servers),
                deep_storage=dict(settings.deep_storage),
                checkpoint=self.checkpoint,
                window_ms=window_millis(spec.processing.window_period),
                handoff_check_seconds=self.options.handoff_check_seconds,
                handoff=self.options.handoff,
                late_filter=not self.joins,
                handoff_window_ms=handoff_window_ms(spec),
                partition_stride=partition_stride(
                    self.options.max_offsets_per_trigger, len(spec.processing.topics) + len(self.joins)
                ),
                replica=replica,
            ),
        )
        self._stop = threading.Event()
        self._progress_written = 0.0

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:

            self._spark = build_spark_session(
                self.settings,
                app_name=f"radstack-stream-{self.spec.name}" + (f"-replica{self.replica}" if self.replica else ""),
                shuffle_partitions=streaming_shuffle_partitions(self.settings),
                java_options=self.settings.streaming.java_options,
            )
        return self._spark

    def _ensure_dlq_topics(self) -> None:

        topics = list(self.spec.processing.topics) + [str(j.get("topic", j["name"])) for j in self.joins]
        wanted = {t: 1 for t in dlq_topics(self.spec, topics)}
        if self.spec.processing.processed_topic:  # 2 partitions: one Druid supervisor task reads both
            wanted[self.spec.processing.processed_topic] = 2
        try:
            ensure_topics(str(self.options.bootstrap_servers), wanted, int(self.settings.kafka.replication_factor))
        except Exception:  # the broker may auto-create them; the write will tell
            log.warning("could not create the dead-letter (and processed) topics", exc_info=True)

    def start(self) -> StreamingQuery:

        enrich.set_deep_storage(self.settings.deep_storage)
        open_deep_storage(self.settings)  # fail early on a bad configuration
        self._ensure_dlq_topics()
        stream = build_stream(self.spark, self.spec, self.options)
        w = (
            stream.writeStream.queryName(
                f"radstack_{self.spec.name}{f'_replica{self.replica}' if self.replica else ''}".replace("-", "_").replace(" ", "_"))
            .foreachBatch(self.sink)
            # always a URI (file:, hdfs:): spark-submit with HDFS deep storage sets fs.defaultFS to
            # hdfs://, where a bare local path would land
            .option("checkpointLocation", self.checkpoint)
        )
        if self.options.available_now:
            w = w.trigger(availableNow=True)
        else:
            w = w.trigger(processingTime=f"{max(self.options.trigger_seconds, 0.0)} seconds")
        self.query = w.start()
        log.info("streaming %s from %s (query %s)", self.spec.name, ",".join(self.spec.processing.topics), self.query.id)
        return self.query

    def poll_progress(self) -> None:
        """Record Spark's new progress events; while the query is active, also rewrite the progress
        state at least every ``HEARTBEAT_SECONDS`` (its ``updated`` time is what ``radctl status``
        reads as health: an idle stream runs no batches but is alive)."""
        if self.query is None:
            return
        changed = self.tracker.update(new_progress(self.query, self.tracker))
        now = time.monotonic()
        if changed or (self.query.isActive and now - self._progress_written >= HEARTBEAT_SECONDS):
            self.metadata.put_state(progress_key(self.spec.name, self.replica), self.tracker.state())
            self._progress_written = now

    def run(self, timeout: float | None = None) -> None:
        """Start (if needed) and block until the query ends (availableNow), ``timeout`` passes or
        :meth:`stop` is called; polls progress meanwhile. Re-raises a query failure."""
        q = self.query or self.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while not self._stop.is_set():
                if q.awaitTermination(self.options.progress_seconds):
                    break
                self.poll_progress()
                if deadline is not None and time.monotonic() > deadline:
                    break
        finally:
            self.poll_progress()
            if not q.isActive:
                forget_producer(str(self.options.bootstrap_servers))
        if q.exception() is not None:
            raise RuntimeError(f"streaming query for {self.spec.name} failed: {q.exception()}")

    def stop(self) -> None:
        self._stop.set()
        if self.query is not None and self.query.isActive:
            self.query.stop()
        self.poll_progress()
        forget_producer(str(self.options.bootstrap_servers))
