"""Every Prometheus metric radstack exposes, defined once, on one registry (:data:`REGISTRY`).

Processes with an HTTP server mount ``GET /metrics`` (the serving process: :mod:`serving.metrics_api`);
the others (streaming job, archiver, batch jobs) call :func:`serve_metrics`. All names start with
``radstack_``; counters end in ``_total`` in the exposition. Label values are bounded (datasource,
topic, query type, error code, segment state), never ids.

Helpers the parts call:

- ingestion: :func:`record_ingestion` (an indexer ``IngestStats`` or a dict of counts),
  :data:`INGEST_LAG`, :data:`INGEST_BATCH_SECONDS`;
- archiver: :func:`record_archive` and :data:`ARCHIVER_WATERMARK`;
- broker: :func:`observe_query` (count, latency by type, errors by code), :data:`BROKER_SEGMENTS_SERVED`;
- coordinator: :func:`set_segment_counts`, the compaction and kill counters below.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, start_http_server
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = [
    "REGISTRY",
    "CONTENT_TYPE_LATEST",
    "render",
    "serve_metrics",
    "record_ingestion",
    "record_archive",
    "observe_query",
    "set_segment_counts",
]

REGISTRY = CollectorRegistry(auto_describe=True)

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
_DURATION_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0)

# ---- ingestion (streaming job, native batch tasks, Spark batch jobs) ---------------------------

INGEST_EVENTS_IN = Counter(
    "radstack_ingest_events_in", "Events read from the source (Kafka records, input rows).",
    ["datasource"], registry=REGISTRY)
INGEST_EVENTS_PROCESSED = Counter(
    "radstack_ingest_events_processed", "Events that made it into segments.", ["datasource"], registry=REGISTRY)
INGEST_EVENTS_THROWN_AWAY = Counter(
    "radstack_ingest_events_thrown_away",
    "Events dropped on purpose: filtered, outside the intervals, or older than the windowPeriod.",
    ["datasource"], registry=REGISTRY)
INGEST_EVENTS_UNPARSEABLE = Counter(
    "radstack_ingest_events_unparseable", "Events that could not be parsed.", ["datasource"], registry=REGISTRY)
INGEST_EVENTS_DEAD_LETTERED = Counter(
    "radstack_ingest_events_dead_lettered", "Events written to the dead-letter topic.", ["datasource"],
    registry=REGISTRY)
INGEST_LAG = Gauge(
    "radstack_ingest_lag_records", "Kafka consumer lag of the streaming job (records behind the end).",
    ["datasource", "topic"], registry=REGISTRY)
INGEST_BATCH_SECONDS = Histogram(
    "radstack_ingest_batch_duration_seconds", "Duration of one streaming micro-batch or batch job.",
    ["datasource", "kind"], buckets=_DURATION_BUCKETS, registry=REGISTRY)

# ---- archiver ---------------------------------------------------------------------------------

ARCHIVER_RECORDS = Counter(
    "radstack_archiver_records", "Raw records archived to deep storage.", ["topic"], registry=REGISTRY)
ARCHIVER_BYTES = Counter(
    "radstack_archiver_bytes", "Bytes of raw archive files written.", ["topic"], registry=REGISTRY)
ARCHIVER_WATERMARK = Gauge(
    "radstack_archiver_watermark_ms", "Event-time watermark of the archive (epoch millis).", ["topic"],
    registry=REGISTRY)

# ---- broker -----------------------------------------------------------------------------------

BROKER_QUERIES = Counter(
    "radstack_broker_queries", "Queries answered (any outcome).", ["type"], registry=REGISTRY)
BROKER_QUERY_SECONDS = Histogram(
    "radstack_broker_query_latency_seconds", "Query latency by query type (sql, timeseries, groupBy, …).",
    ["type"], buckets=_LATENCY_BUCKETS, registry=REGISTRY)
BROKER_QUERY_ERRORS = Counter(
    "radstack_broker_query_errors", "Failed queries by Druid error code (or HTTP status).", ["code"],
    registry=REGISTRY)
BROKER_QUERIES_RUNNING = Gauge(
    "radstack_broker_queries_running", "Queries holding one of server.max_concurrent_queries slots.",
    registry=REGISTRY)
BROKER_QUERY_QUEUE_DEPTH = Gauge(
    "radstack_broker_query_queue_depth", "Queries waiting for a slot (at most server.max_queued_queries).",
    registry=REGISTRY)
PROCESS_RESIDENT_BYTES = Gauge(
    "radstack_process_resident_bytes", "The serving process's resident memory, as the memory guard last saw it.",
    registry=REGISTRY)
MEMORY_GUARD_STOPS = Counter(
    "radstack_memory_guard_stops_total", "Queries the memory guard stopped because the process passed its budget "
    "(server.memory_limit + server.memory_headroom).", registry=REGISTRY)
BROKER_QUERY_QUEUE_WAIT = Histogram(
    "radstack_broker_query_queue_wait_seconds", "How long queries waited for a slot before running.",
    buckets=_LATENCY_BUCKETS, registry=REGISTRY)
BROKER_SEGMENTS_SERVED = Gauge(
    "radstack_broker_segments_served", "Segments the broker currently serves.", ["datasource"],
    registry=REGISTRY)

# ---- coordinator ------------------------------------------------------------------------------

COORDINATOR_SEGMENTS = Gauge(
    "radstack_coordinator_segments", "Segments in the metadata store by state (used, unused, overshadowed).",
    ["datasource", "state"], registry=REGISTRY)
COORDINATOR_RUNS = Counter(
    "radstack_coordinator_runs", "Coordinator duty passes, by duty and outcome.", ["duty", "outcome"],
    registry=REGISTRY)
RETENTION_DROPPED = Counter(
    "radstack_retention_segments_dropped", "Segments marked unused by retention (drop) rules.",
    ["datasource"], registry=REGISTRY)
COMPACTION_INTERVALS = Counter(
    "radstack_compaction_intervals", "Compaction runs of one interval, by outcome (success, failed, skipped).",
    ["datasource", "outcome"], registry=REGISTRY)
COMPACTION_ROWS_IN = Counter(
    "radstack_compaction_rows_in", "Rows read by compaction.", ["datasource"], registry=REGISTRY)
COMPACTION_ROWS_OUT = Counter(
    "radstack_compaction_rows_out", "Rows written by compaction.", ["datasource"], registry=REGISTRY)
COMPACTION_PENDING = Gauge(
    "radstack_compaction_pending_intervals", "Intervals waiting for compaction after the last plan.",
    ["datasource"], registry=REGISTRY)
COMPACTION_SECONDS = Histogram(
    "radstack_compaction_duration_seconds", "Duration of compacting one interval.", ["runner"],
    buckets=_DURATION_BUCKETS, registry=REGISTRY)
KILL_SEGMENTS = Counter(
    "radstack_kill_segments", "Unused segments deleted from deep storage and the metadata store.",
    ["datasource"], registry=REGISTRY)
KILL_BYTES = Counter(
    "radstack_kill_bytes", "Bytes of segment files deleted by kill.", ["datasource"], registry=REGISTRY)
KILL_PENDING = Gauge(
    "radstack_kill_pending_segments", "Unused segments eligible for kill after the last pass.", ["datasource"],
    registry=REGISTRY)


# ---- helpers ----------------------------------------------------------------------------------


def render(registry: CollectorRegistry = REGISTRY) -> bytes:
    """The text exposition format (what ``GET /metrics`` returns)."""
    return generate_latest(registry)


def serve_metrics(port: int, addr: str = "127.0.0.1", registry: CollectorRegistry = REGISTRY) -> tuple[Any, Any]:
    """Serve ``/metrics`` on ``addr:port`` from a daemon thread (for processes without an HTTP
    server). ``port = 0`` picks a free port: read it from ``server.server_port``. Returns
    ``(server, thread)``; stop with ``server.shutdown()``."""
    server, thread = start_http_server(port, addr=addr, registry=registry)
    return server, thread


def _get(stats: Any, *names: str) -> int:
    for n in names:
        if isinstance(stats, Mapping):
            if n in stats and stats[n] is not None:
                return int(stats[n])
        elif getattr(stats, n, None) is not None:
            return int(getattr(stats, n))
    return 0


def record_ingestion(
    datasource: str,
    stats: Any,
    *,
    events_in: int | None = None,
    dead_lettered: int = 0,
    duration_s: float | None = None,
    kind: str = "stream",
) -> None:
    """Add one batch's counts: ``stats`` is an indexer ``IngestStats`` or a mapping with
    ``processed``/``thrownAway``/``unparseable`` (either spelling). ``events_in`` defaults to the sum."""
    processed = _get(stats, "processed")
    thrown = _get(stats, "thrown_away", "thrownAway")
    unparseable = _get(stats, "unparseable")
    total = processed + thrown + unparseable + dead_lettered if events_in is None else events_in
    INGEST_EVENTS_IN.labels(datasource).inc(max(0, total))
    INGEST_EVENTS_PROCESSED.labels(datasource).inc(max(0, processed))
    INGEST_EVENTS_THROWN_AWAY.labels(datasource).inc(max(0, thrown))
    INGEST_EVENTS_UNPARSEABLE.labels(datasource).inc(max(0, unparseable))
    if dead_lettered:
        INGEST_EVENTS_DEAD_LETTERED.labels(datasource).inc(dead_lettered)
    if duration_s is not None:
        INGEST_BATCH_SECONDS.labels(datasource, kind).observe(max(0.0, duration_s))


def record_archive(topic: str, records: int, nbytes: int, watermark_ms: int | None = None) -> None:
    ARCHIVER_RECORDS.labels(topic).inc(max(0, records))
    ARCHIVER_BYTES.labels(topic).inc(max(0, nbytes))
    if watermark_ms is not None:
        ARCHIVER_WATERMARK.labels(topic).set(watermark_ms)


def observe_query(query_type: str, seconds: float, error_code: str | None = None) -> None:
    """One finished query: counted, its latency observed under its type, and its error code if any."""
    qt = query_type or "unknown"
    BROKER_QUERIES.labels(qt).inc()
    BROKER_QUERY_SECONDS.labels(qt).observe(max(0.0, seconds))
    if error_code:
        BROKER_QUERY_ERRORS.labels(error_code).inc()


def set_segment_counts(counts: Mapping[str, Mapping[str, int]]) -> None:
    """``{datasource: {"used": n, "unused": n, "overshadowed": n}}``; datasources that vanished are
    set to 0 so a series never sticks at a stale value."""
    seen: set[tuple[str, str]] = set()
    for ds, by_state in counts.items():
        for state in ("used", "unused", "overshadowed"):
            COORDINATOR_SEGMENTS.labels(ds, state).set(int(by_state.get(state, 0)))
            seen.add((ds, state))
    for metric in COORDINATOR_SEGMENTS.collect():
        for s in metric.samples:
            key = (s.labels.get("datasource", ""), s.labels.get("state", ""))
            if key not in seen:
                COORDINATOR_SEGMENTS.labels(*key).set(0)
