"""The batch rebuild: one Spark job for (datasource, interval), from the raw archive to published segments.

Steps (the job's start time is its version):

1. plan the interval into segment-granularity chunks; refuse chunks that are not closed (see
   :mod:`batch.planning`) unless ``force``;
2. clean up the files of earlier runs that died (:mod:`batch.job_state`) and record this run;
3. read the raw archive of the chunks (:mod:`batch.archive_reader`; join-side topics padded by the join
   window) and run the shared pipeline (:func:`radstack.pipeline.batch.batch_rows`: Spark's
   ``from_json``, validation, the full join, enrichment, transforms — the same functions the
   streaming job runs);
4. roll up in Spark with ONE shuffle (:func:`radstack.pipeline.rollup.rollup_rows`: hash-partitioned
   on the rollup key, so every row of one rolled-up (time, dims) group lands in one partition —
   perfect rollup — and every copy of a re-sent event meets its original there, where the exact
   dedup on the event id drops it), sorted per partition; the executors turn the sorted runs into
   rolled-up rows and write them as segment files (:func:`radstack.pipeline.indexing.write_segments`),
   each partition numbering its segments in its own range;
5. renumber each chunk's segments into one core set ``0..N-1`` (``partitions = N``), add a tombstone for
   every chunk without rows, and publish everything in ONE metadata transaction — nothing is visible
   before that, and a core set is only served once complete, so queries switch atomically.

Run embedded (:func:`rebuild`, ``local[*]``) or as ``spark-submit batch/rebuild_job.py --datasource D
--interval I`` on a cluster (:mod:`batch.spark_submit` builds that command); both read the same
``radstack.yaml``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import orjson

from batch import job_state
from batch.archive_reader import archived_records_at_most, read_archive, storage_spark_conf
from batch.planning import (
    BackfillPlanError,
    ClosedCheck,
    NotClosedError,
    check_closed,
    parse_interval,
    plan_chunks,
)
from batch.tombstones import with_tombstones
from radstack.config import load_settings
from radstack.druid_cluster.json_export import write_json_lines
from radstack.pipeline.batch import BatchRows, batch_rows
from radstack.pipeline.indexing import write_segments
from radstack.pipeline.input_schema import input_fields, join_options
from radstack.pipeline.rollup import rollup_rows
from radstack.pipeline.spark_connect import close_session, connect_session
from radstack.pipeline.spark_session import build_spark_session, session_conf
from radstack.spec import TIME_COLUMN, DatasourceSpec
from radstack.storage.corrections import ChunkCounts, corrections, realtime_served
from radstack.storage.deep_storage import open_deep_storage
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.indexer import renumber_core
from radstack.storage.metadata import MetadataStore
from radstack.storage.publish import publish
from radstack.storage.raw_archive import archive_watermark
from radstack.storage.supervisors import datasource_spec
from radstack.time.clock import now_millis
from radstack.time.floor import granularity_floor_sql
from radstack.time.intervals import Interval, Period, format_instant, parse_instant

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from radstack.config import Settings

log = logging.getLogger(__name__)

__all__ = ["RebuildResult", "rebuild", "rebuild_spec", "closed_checks", "read_inputs", "index_chunks", "main"]

STAGES = ("prepare", "spark_start", "index", "renumber", "corrections", "publish")
"""The steps :attr:`RebuildResult.stages` times: checks, clean-up and registration in the metadata store;
starting Spark or opening a session on the warm one (when the caller gave no session); the Spark job (read, parse, roll up, write segment
files); renumbering each chunk's core set; recording what the publish corrects; the publish."""

PARTITION_STRIDE = 1_000_000
"""Partition ``p`` of the Spark job numbers its segments from ``p * PARTITION_STRIDE`` (renumbered later)."""


@dataclass
class RebuildResult:
    datasource: str
    version: str
    chunks: list[Interval]
    segments: list[Any] = field(default_factory=list)  # DataSegment, tombstones included
    tombstones: list[Interval] = field(default_factory=list)
    rows: int = 0  # rolled-up rows written
    events: int = 0  # input rows indexed (= sum of the count metric)
    stats: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    cleaned: list[str] = field(default_factory=list)
    corrections: list[Any] = field(default_factory=list)  # CorrectionRow per chunk whose real time it replaced
    stages: dict[str, float] = field(default_factory=dict)  # seconds per step of the job (:data:`STAGES`)
    spark: str = "given"  # what ran the job: "connect" (the warm Spark), "local" (its own) or "given" (the caller's)

    def to_json(self) -> dict[str, Any]:
        return {
            "datasource": self.datasource,
            "version": self.version,
            "chunks": [c.iso() for c in self.chunks],
            "segments": [s.identifier for s in self.segments],
            "tombstones": [t.iso() for t in self.tombstones],
            "rows": self.rows,
            "events": self.events,
            "stats": self.stats,
            "seconds": round(self.seconds, 3),
            "stages": {k: round(v, 3) for k, v in self.stages.items()},
            "spark": self.spark,
            "corrections": [{"interval": Interval(c.start, c.end).iso(), "realtime_events": c.realtime_events,
                             "batch_events": c.batch_events, "late_recovered": c.late_recovered,
                             "duplicates_removed": c.duplicates_removed, "invalid_dropped": c.invalid_dropped}
                            for c in self.corrections],
        }


# ---- planning ----------------------------------------------------------------------------------


def closed_checks(
    metadata: MetadataStore, spec: DatasourceSpec, chunks: list[Interval], *, now_ms: int | None = None
) -> list[ClosedCheck]:

    marks = {t: archive_watermark(metadata, t) for t in spec.processing.topics}
    return [check_closed(c, spec.processing.window_period, marks, now_ms=now_ms) for c in chunks]


def _join_pad_ms(join: dict[str, Any]) -> int:
    """How far around a chunk a joined topic is read: the join window (``window``/``within``/
    ``maxDelay``/``delay``), at least one hour."""
    pad = 3_600_000
    for key in ("window", "within", "maxDelay", "max_delay", "delay"):
        val = join.get(key)
        if isinstance(val, str) and val.strip().upper().startswith("P"):
            pad = max(pad, Period.parse(val).fixed_millis)
    return pad


def _join_topic(join: dict[str, Any]) -> str:
    return str(join.get("topic") or join.get("rightTopic") or join.get("right_topic") or join["name"])


def read_inputs(
    spark: SparkSession, deep_storage: DeepStorage, spec: DatasourceSpec, chunks: list[Interval], *,
    parsed: bool = True,
) -> tuple[DataFrame, dict[str, DataFrame]]:
    """The raw archive rows the rebuild of ``chunks`` needs: the datasource's own topics for exactly the
    chunks, with the parsed archive's columns of the fields it reads (``parsed``: batch.parsed_archive),
    and for every stream join the joined topic padded by the join window (a click may be delivered
    after its impression's hour), keyed by join name (raw: the join parses it)."""

    whole = Interval(chunks[0].start, chunks[-1].end)
    joins = join_options(spec)
    side = {_join_topic(j) for j in joins}
    primary = [t for t in spec.processing.topics if t not in side]
    # the parsed archive's columns of the fields the spec reads (none: every record's JSON is parsed)
    fields = input_fields(spec) if parsed else ()
    main = read_archive(spark, deep_storage, {t: whole for t in primary}, fields)
    joined = {}
    for j in joins:
        pad = _join_pad_ms(j)
        joined[str(j["name"])] = read_archive(
            spark, deep_storage, {_join_topic(j): Interval(whole.start - pad, whole.end + pad)}
        )
    return main, joined


# ---- indexing ----------------------------------------------------------------------------------

def index_chunks(
    rows: BatchRows,
    spec: DatasourceSpec,
    chunks: list[Interval],
    *,
    version: str,
    deep_storage_settings: dict[str, Any],
    partitions: int,
) -> tuple[list[Any], dict[str, int], dict[int, list[int]]]:
    """Keep the rows of ``chunks``, roll them up in Spark — one shuffle on the rollup key that also
    drops the copies of re-sent events (:func:`radstack.pipeline.rollup.rollup_rows`) — and write
    each of the ``partitions`` Spark partitions' rows of each chunk as one segment file of
    ``version`` on the executors (:func:`radstack.pipeline.indexing.write_segments`), each partition
    in its own number range, to be renumbered with :func:`radstack.storage.indexer.renumber_core`;
    nothing is published here. Returns the segments, the stats and, per chunk start, the rows the
    writers got and the events they kept (:class:`radstack.storage.corrections.ChunkCounts`)."""
    from pyspark.sql import functions as F  # lazy: only Spark code paths load pyspark

    lo, hi = chunks[0].start, chunks[-1].end
    df = rows.rows.where((F.col(TIME_COLUMN) >= F.lit(lo)) & (F.col(TIME_COLUMN) < F.lit(hi)))
    for_segments = rollup_rows(df, spec.data_schema, partitions=partitions, dedup_key=rows.dedup_key)
    res = write_segments(for_segments, spec.data_schema, deep_storage_config=deep_storage_settings,
                         version=version, stride=PARTITION_STRIDE, dedup=rows.dedup_key is not None)  # fmt: skip
    return res.segments, res.stats.row_stats(with_filtered=True), res.chunk_rows


def raw_counts(raw: DataFrame, spec: DatasourceSpec) -> dict[int, int] | None:
    """Archived events per segment bucket start (by their event time; an invalid event by its Kafka
    time, as the archiver filed it): one pass over the archive's ``event_time`` column, no JSON parsed.
    ``None`` when the input has no event time (an Overlord task's files)."""
    if "event_time" not in raw.columns:
        return None
    bucket = granularity_floor_sql(spec.data_schema.segment_granularity, "unix_millis(event_time)", "spark")
    return {int(r["s"]): int(r["n"]) for r in raw.selectExpr(f"{bucket} AS s").groupBy("s").count()
            .withColumnRenamed("count", "n").collect()}


# ---- the job -----------------------------------------------------------------------------------


QUICK_JIT = "-XX:TieredStopAtLevel=1"
"""JVM option of a small rebuild's Spark (``batch.quick_jit_max_records``): HotSpot's C1 compiler only."""


def _small_job(settings: Settings, storage: DeepStorage, spec: DatasourceSpec, chunks: list[Interval]) -> bool:
    """Whether the rebuild of ``chunks`` reads at most ``batch.quick_jit_max_records`` archived records."""
    limit = int(settings.batch.quick_jit_max_records)
    if limit <= 0:
        return False
    whole = Interval(chunks[0].start, chunks[-1].end)
    return archived_records_at_most(storage, dict.fromkeys(spec.processing.topics, whole)) <= limit


def _job_session(settings: Settings, storage: DeepStorage, spec: DatasourceSpec, chunks: list[Interval], *,
                 quick: bool) -> tuple[SparkSession, str]:
    """The rebuild's Spark: a session on the warm Spark Connect server when one runs for this deep
    storage (:mod:`radstack.pipeline.spark_connect`), else a local session of its own — with the quick
    JIT when ``quick`` and the job is small (:func:`_small_job`). Returns it and ``connect``/``local``."""
    name = f"radstack-rebuild-{spec.name}"
    storage_conf = storage_spark_conf(settings.deep_storage, settings.jvm_dir)
    remote = connect_session(settings, app_name=name,
                             conf=session_conf(settings, kafka=False, log_name="batch", extra_conf=storage_conf))  # fmt: skip
    if remote is not None:
        return remote, "connect"
    small = quick and _small_job(settings, storage, spec, chunks)
    return build_spark_session(settings, app_name=name, kafka=False, log_name="batch", extra_conf=storage_conf,
                               java_options=QUICK_JIT if small else ""), "local"  # fmt: skip


class _Stopwatch:
    """Seconds per named step, each from the end of the one before."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.laps[name] = now - self._last
        self._last = now


InputReader = Callable[["SparkSession", Any, DatasourceSpec, list[Interval]], tuple["DataFrame", dict[str, "DataFrame"]]]


def _corrections(md: MetadataStore, storage: DeepStorage, spec: DatasourceSpec, chunks: list[Interval],
                 full: list[Any], raw: Any, rows: BatchRows, written: dict[int, Any]) -> list[Any]:
    """What this publish changes against the real-time answer (recorded in the same transaction)."""
    served = realtime_served(md, spec.name, chunks, streamed=bool(spec.processing.topics))
    if not served:
        return []
    archived = raw_counts(raw, spec)
    counts = {c.start: ChunkCounts(*written.get(c.start, (0, 0)), None if archived is None else archived.get(c.start, 0))
              for c in served}  # fmt: skip
    return corrections(storage, spec, served, full, counts, dedup_counted=rows.dedup_key is not None)


def rebuild(
    settings: Settings,
    datasource: str,
    interval: Interval,
    *,
    spark: SparkSession | None = None,
    force: bool = False,
    now_ms: int | None = None,
    metadata: MetadataStore | None = None,
    deep_storage: DeepStorage | None = None,
) -> RebuildResult:
    """Rebuild ``interval`` (widened to whole segment buckets) of ``datasource`` (a catalog spec) from the
    raw archive and publish it."""

    return rebuild_spec(settings, datasource_spec(settings, datasource, metadata), interval, spark=spark, force=force,
                        now_ms=now_ms, metadata=metadata, deep_storage=deep_storage)  # fmt: skip


def rebuild_spec(
    settings: Settings,
    spec: DatasourceSpec,
    interval: Interval,
    *,
    spark: SparkSession | None = None,
    force: bool = False,
    now_ms: int | None = None,
    metadata: MetadataStore | None = None,
    deep_storage: DeepStorage | None = None,
    reader: InputReader | None = None,
    min_version: str = "",
) -> RebuildResult:
    """:func:`rebuild` for any spec; ``reader`` replaces the raw-archive reader (e.g. JSON files from
    ``hdfs://``/``s3a://`` for an Overlord task); the version is the start time, raised above
    ``min_version``."""

    t0 = time.monotonic()
    stages = _Stopwatch()
    started = now_millis()
    version = format_instant(started)
    if min_version and version <= min_version:
        version = format_instant(parse_instant(min_version) + 1)
    datasource = spec.name
    chunks = plan_chunks(interval, spec.data_schema.segment_granularity)
    own_md = metadata is None
    md = metadata if metadata is not None else MetadataStore.from_settings(settings)
    storage = deep_storage if deep_storage is not None else open_deep_storage(settings)
    try:
        if not force:
            checks = closed_checks(md, spec, chunks, now_ms=now_ms)
            if not all(c.closed for c in checks):
                raise NotClosedError(checks)
        cleaned = job_state.clean_dead_jobs(
            md, storage, datasource, stale_seconds=float(settings.batch.stale_job_seconds)
        )
        job_state.register(md, datasource, version, chunks)
        stages.lap("prepare")
        ran_on, remote = "given", None
        try:
            if spark is None:
                spark, ran_on = _job_session(settings, storage, spec, chunks, quick=reader is None)
                remote = spark if ran_on == "connect" else None
                stages.lap("spark_start")
            raw, joined = (reader or partial(read_inputs, parsed=settings.batch.parsed_archive))(spark, storage, spec, chunks)
            rows = batch_rows(spark, raw, spec, joined=joined)
            parts = int(settings.batch.partitions or 0) or int(settings.spark.shuffle_partitions)
            segments, stats, written = index_chunks(
                rows, spec, chunks, version=version, deep_storage_settings=settings.deep_storage, partitions=parts
            )
            stages.lap("index")
            segments = renumber_core(segments, storage)
            dims = segments[0].dimensions if segments else tuple(d.name for d in spec.data_schema.dimensions)
            full = with_tombstones(datasource, chunks, segments, version, dimensions=dims,
                                   metrics=spec.data_schema.metric_names)  # fmt: skip
            stages.lap("renumber")
            if settings.druid.serves(datasource) and not settings.druid.parquet_input:
                write_json_lines(storage, segments)  # what the Druid cluster's re-index reads (no Parquet there)
                stages.lap("druid_json")
            fixes = _corrections(md, storage, spec, chunks, full, raw, rows, written)
            stages.lap("corrections")
            publish(md, storage, full, corrections=fixes)
            stages.lap("publish")
        except BaseException:
            # leave nothing behind: this run's files go now (or, if we are killed, on the next run)
            for prefix in job_state.version_prefixes(datasource, chunks, version):
                try:
                    storage.delete_prefix(prefix)
                except Exception:  # noqa: BLE001 - the next run cleans up what is left
                    log.warning("could not delete %s", prefix, exc_info=True)
            job_state.unregister(md, datasource, version)
            raise
        finally:
            if remote is not None:  # this job's client of the warm Spark: closed (its session and the server stay)
                close_session(remote)
        job_state.unregister(md, datasource, version)
        data = [s for s in full if not s.is_tombstone]
        return RebuildResult(
            datasource=datasource,
            version=version,
            chunks=chunks,
            segments=full,
            tombstones=[s.interval for s in full if s.is_tombstone],
            rows=sum(s.num_rows for s in data),
            events=int(stats.get("processed", 0)),
            stats=stats,
            seconds=time.monotonic() - t0,
            cleaned=cleaned,
            corrections=fixes,
            stages=stages.laps,
            spark=ran_on,
        )
    finally:
        if own_md:
            md.close()


# ---- spark-submit entry point --------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """``spark-submit batch/rebuild_job.py --datasource D --interval I [--config F] [--force]``."""

    p = argparse.ArgumentParser(prog="rebuild_job", description=__doc__.splitlines()[0])
    p.add_argument("--datasource", required=True)
    p.add_argument("--interval", required=True)
    p.add_argument("--config", default=None)
    p.add_argument("--force", action="store_true")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        settings = load_settings(a.config)
        res = rebuild(settings, a.datasource, parse_interval(a.interval), force=a.force)
    except (BackfillPlanError, NotClosedError, KeyError) as e:
        print(f"rebuild failed: {e}", file=sys.stderr)
        return 2
    print(orjson.dumps(res.to_json()).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
