"""Druid ingestion specs generated from a radstack datasource spec.

Two specs feed a real Apache Druid cluster the same datasource radstack serves:

* :func:`kafka_supervisor_spec` — a Kafka supervisor (``type: kafka``) reading the **processed** topic:
  rows the shared transform has already parsed, transformed, filtered, joined and enriched (so no
  ``transformSpec`` is repeated), one JSON object per event with ``__time`` in epoch millis, the
  dimensions and the metrics' input fields. The topic is ``processing.processedTopic`` or
  ``{dataSource}-processed``. ``lateMessageRejectionPeriod`` is the spec's ``windowPeriod``.
* :func:`index_parallel_spec` — a native batch task (``type: index_parallel``) that re-indexes the
  **batch job's Parquet output** (the visible segment files of an interval, on local disk, HDFS or S3)
  with ``appendToExisting: false`` and ``dropExisting: true``: Druid gives the result a new version
  that overshadows whatever it had for those chunks — real-time segments included — exactly as a
  radstack batch rebuild overshadows radstack's real-time segments. The files are already rolled up at
  ``queryGranularity``, so the metrics are the *combining* aggregators (``count`` → ``longSum`` of
  ``count``, ``doubleSum price`` → ``doubleSum`` of ``price``…) and the timestamp is ``__time``.

Every function returns plain JSON-able dicts; :func:`druid_specs` bundles both for ``radctl druid specs``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from radstack.config import DeepStorageSettings, DruidSettings
from radstack.spec import TIME_COLUMN, DataSchema, DatasourceSpec
from radstack.storage.deep_storage.backends import backend_for_load_spec, backend_named
from radstack.storage.deep_storage.base import DeepStorageError
from radstack.storage.segments import DataSegment
from radstack.storage.timeline import VersionedIntervalTimeline
from radstack.time.intervals import Interval
from radstack.user_errors import UserError

__all__ = [
    "DruidSpecError",
    "SegmentFiles",
    "processed_topic",
    "with_processed_topic",
    "kafka_supervisor_spec",
    "chunk_interval",
    "visible_segment_files",
    "input_source_for",
    "index_parallel_spec",
    "druid_specs",
]

PARQUET_INPUT_FORMAT: dict[str, Any] = {"type": "parquet", "binaryAsString": True}


class DruidSpecError(ValueError, UserError):
    """The ingestion spec cannot be generated (no data for the interval, mixed storage, …)."""


@dataclass(frozen=True)
class SegmentFiles:
    """The Parquet files a re-index reads: one storage type and the locations in Druid's terms."""

    storage: str  # local | hdfs | s3
    locations: tuple[str, ...]  # local paths, hdfs:// URIs or s3:// URIs


# ---- the real-time side: Kafka supervisor ------------------------------------------------------


def processed_topic(spec: DatasourceSpec) -> str:
    """The topic of processed (enriched, joined) rows: ``processing.processedTopic`` (which the streaming
    job writes), else ``{dataSource}-processed`` for whoever writes it."""
    return spec.processing.processed_topic or f"{spec.name}-processed"


def with_processed_topic(spec: DatasourceSpec, druid: DruidSettings) -> DatasourceSpec:
    """``spec`` as the streaming job runs it: a datasource the Druid cluster serves (``druid.datasources``)
    writes its processed topic even where its spec names none (``{dataSource}-processed``), since that is
    what Druid's supervisor reads."""
    if not druid.serves(spec.name) or spec.processing.processed_topic or not spec.processing.topics:
        return spec
    return replace(spec, processing=replace(spec.processing, processed_topic=processed_topic(spec)))


def _projections_over_input(schema: DataSchema) -> list[dict[str, Any]]:
    """The projections for Druid ingesting raw (processed, not rolled-up) rows: a radstack projection
    aggregator reads a *metric*; Druid's read input columns — so each becomes its metric's own
    aggregation (a sum of a ``count`` metric → ``count``; a sum/min/max of a metric of the same kind →
    that kind over the metric's input field). A projection with any other combination is left out."""
    metrics = {m.name: m for m in schema.metrics}
    out = []
    for p in schema.projections:
        aggs: list[dict[str, Any]] = []
        for a in p.aggregators:
            m = metrics.get(a.field_name or "")
            if a.kind == "count":
                aggs.append(a.to_json())
            elif m is not None and m.type == "count" and a.kind == "sum":
                aggs.append({"type": "count", "name": a.name})
            elif m is not None and m.kind == a.kind and m.field_name and m.expression is None:
                aggs.append({"type": a.type, "name": a.name, "fieldName": m.field_name})
        if len(aggs) == len(p.aggregators):
            out.append({**p.to_json(), "aggregators": aggs})
    return out


def _data_schema_for_processed(schema: DataSchema) -> dict[str, Any]:
    out = schema.to_json()
    out.pop("transformSpec", None)  # already applied by the shared transform before the topic
    if schema.projections:
        out["projections"] = _projections_over_input(schema)
    out["timestampSpec"] = {"column": TIME_COLUMN, "format": "millis"}
    gran = dict(out["granularitySpec"])
    gran.pop("intervals", None)  # a supervisor ingests whatever arrives
    out["granularitySpec"] = gran
    return out


def kafka_supervisor_spec(
    spec: DatasourceSpec,
    *,
    bootstrap_servers: str,
    topic: str | None = None,
    task_count: int = 1,
    replicas: int = 1,
    task_duration: str = "PT1H",
    use_earliest_offset: bool = True,
    consumer_properties: Mapping[str, Any] | None = None,
    max_rows_per_segment: int = 5_000_000,
) -> dict[str, Any]:
    """Druid's Kafka supervisor spec for ``spec``'s processed topic (``POST /druid/indexer/v1/supervisor``)."""
    if not bootstrap_servers:
        raise DruidSpecError("a Kafka supervisor needs bootstrap servers (kafka.bootstrap_servers)")
    io_config: dict[str, Any] = {
        "type": "kafka",
        "topic": topic or processed_topic(spec),
        "inputFormat": {"type": "json"},
        "consumerProperties": {"bootstrap.servers": bootstrap_servers, **dict(consumer_properties or {})},
        "taskCount": task_count,
        "replicas": replicas,
        "taskDuration": task_duration,
        "useEarliestOffset": use_earliest_offset,
        "lateMessageRejectionPeriod": spec.processing.window_period.iso(),
    }
    return {
        "type": "kafka",
        "spec": {
            "dataSchema": _data_schema_for_processed(spec.data_schema),
            "ioConfig": io_config,
            "tuningConfig": {
                "type": "kafka",
                "maxRowsPerSegment": max_rows_per_segment,
                "maxRowsInMemory": 150_000,
            },
        },
    }


# ---- the batch side: index_parallel over the batch job's Parquet output ------------------------


def chunk_interval(spec: DatasourceSpec, interval: Interval) -> Interval:
    """``interval`` widened to whole ``segmentGranularity`` chunks (what a rebuild replaces)."""
    gran = spec.data_schema.segment_granularity
    if gran.is_all:
        return interval
    start = gran.bucket_start(interval.start)
    last = gran.bucket_start(interval.end - 1) if interval.end > interval.start else start
    return Interval(start, gran.next_start(last))


def _location(load_spec: Mapping[str, Any], deep_storage: DeepStorageSettings) -> tuple[str, str]:
    """The backend type of a segment's files and where Druid reads them."""
    try:
        backend = backend_for_load_spec(load_spec)
    except DeepStorageError:
        raise DruidSpecError(f"cannot re-index a segment with loadSpec type {str(load_spec.get('type', ''))!r}") from None
    try:
        return backend.type, backend.druid_location(load_spec, deep_storage)
    except DeepStorageError as e:
        raise DruidSpecError(str(e)) from None


def visible_segment_files(
    segments: Iterable[DataSegment],
    interval: Interval,
    deep_storage: DeepStorageSettings | None = None,
) -> SegmentFiles:
    """The data files of the segments radstack serves for ``interval`` (the newest complete version of
    each chunk — after a rebuild, the batch job's output). Tombstones contribute no files.

    A segment only partly visible (split by a newer version of another granularity) is refused: its
    file holds rows the timeline hides, and a re-index would bring them back."""
    timeline = VersionedIntervalTimeline.from_segments(segments)
    locations: list[str] = []
    kinds: set[str] = set()
    seen: set[str] = set()
    for vis in timeline.visible_segments(interval):
        seg = vis.segment
        if seg.identifier in seen:
            continue
        seen.add(seg.identifier)
        clipped = Interval(max(seg.interval.start, interval.start), min(seg.interval.end, interval.end))
        if vis.interval != clipped:
            raise DruidSpecError(
                f"segment {seg.identifier} is only partly visible ({vis.interval.iso()}); "
                "rebuild or compact the interval with one segment granularity first"
            )
        kind, loc = _location(seg.load_spec, deep_storage or DeepStorageSettings())
        kinds.add(kind)
        locations.append(loc)
    if not locations:
        raise DruidSpecError(f"no segment files are visible in {interval.iso()}; run the batch job first")
    if len(kinds) > 1:
        raise DruidSpecError(f"the interval's files are on several storage types ({', '.join(sorted(kinds))})")
    return SegmentFiles(kinds.pop(), tuple(locations))


def input_source_for(files: SegmentFiles) -> dict[str, Any]:
    """Druid's ``inputSource`` for the files: ``local`` (``files``), ``hdfs`` (``paths``), ``s3`` (``uris``)."""
    try:
        return backend_named(files.storage).druid_input_source(files.locations)
    except DeepStorageError as e:
        raise DruidSpecError(f"unknown storage type {files.storage!r}") from e


def _data_schema_for_segments(schema: DataSchema, interval: Interval) -> dict[str, Any]:
    out = schema.to_json()
    out.pop("transformSpec", None)  # the files hold transformed, filtered rows
    out["timestampSpec"] = {"column": TIME_COLUMN, "format": "millis"}
    # the files are rolled up already: re-aggregate with the combining aggregators
    out["metricsSpec"] = [m.combining().to_json() for m in schema.metrics]
    gran = dict(out["granularitySpec"])
    gran["intervals"] = [interval.iso()]
    out["granularitySpec"] = gran
    return out


def index_parallel_spec(
    spec: DatasourceSpec,
    interval: Interval,
    input_source: Mapping[str, Any],
    *,
    input_format: Mapping[str, Any] | None = None,
    max_num_concurrent_sub_tasks: int = 1,
    max_rows_per_segment: int = 5_000_000,
    await_segment_availability_ms: int = 0,
    task_id: str | None = None,
    context: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A native batch task that replaces ``interval`` (widened to whole chunks) with the rows of
    ``input_source`` — the batch job's Parquet output (:func:`input_source_for`).

    ``input_format`` defaults to Parquet (Druid needs ``druid-parquet-extensions``); any format with
    the same columns works (the local oracle test converts the files to JSON lines).
    ``await_segment_availability_ms`` > 0 makes Druid's task finish only once the new segments are
    queryable (``tuningConfig.awaitSegmentAvailabilityTimeoutMillis``)."""
    chunks = chunk_interval(spec, interval)
    tuning: dict[str, Any] = {
        "type": "index_parallel",
        "partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": max_rows_per_segment},
        "maxNumConcurrentSubTasks": max_num_concurrent_sub_tasks,
    }
    if await_segment_availability_ms > 0:
        tuning["awaitSegmentAvailabilityTimeoutMillis"] = await_segment_availability_ms
    task: dict[str, Any] = {
        "type": "index_parallel",
        "spec": {
            "dataSchema": _data_schema_for_segments(spec.data_schema, chunks),
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": dict(input_source),
                "inputFormat": dict(input_format or PARQUET_INPUT_FORMAT),
                "appendToExisting": False,
                "dropExisting": True,
            },
            "tuningConfig": tuning,
        },
    }
    if task_id:
        task["id"] = task_id
    if context:
        task["context"] = dict(context)
    return task


def druid_specs(
    spec: DatasourceSpec,
    *,
    bootstrap_servers: str,
    interval: Interval | None = None,
    segments: Sequence[DataSegment] = (),
    deep_storage: DeepStorageSettings | None = None,
) -> dict[str, Any]:
    """``{"supervisor": …}`` and, given an interval, ``{"index_parallel": …}`` over the segment files
    visible in it (``segments``: radstack's used segments of the datasource)."""
    out: dict[str, Any] = {"supervisor": kafka_supervisor_spec(spec, bootstrap_servers=bootstrap_servers)}
    if interval is not None:
        chunks = chunk_interval(spec, interval)
        files = visible_segment_files(segments, chunks, deep_storage)
        out["index_parallel"] = index_parallel_spec(spec, chunks, input_source_for(files))
    return out
