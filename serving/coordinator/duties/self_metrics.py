"""The platform's own metrics as a datasource (``radstack_metrics``), as the RADStack paper's metrics
cluster did: every ``coordinator.self_metrics.period_seconds`` (when ``coordinator.self_metrics.on``)
the samples of :data:`radstack.metrics.REGISTRY` are indexed through the shared indexer and appended
to the current hour, so ``SELECT metric, MAX(value_max) FROM radstack_metrics GROUP BY 1`` works
like any other query.

One row per sample: ``__time`` (MINUTE), dimensions ``metric`` (the sample name, e.g.
``radstack_broker_queries_total``), ``labels`` (``k=v,…`` sorted), ``host``, and one dimension per
common label (``datasource``, ``topic``, ``type``, ``code``, ``state``, ``duty``, ``outcome``,
``kind``, ``runner``); metrics ``count``, ``value_sum``, ``value_min``, ``value_max``. Histogram
buckets and ``_created`` samples are left out (``_sum`` and ``_count`` stay).

Corrections (``sys.corrections``, :mod:`radstack.storage.corrections`) recorded since the last run come
along, at the time they are ingested: ``radstack_correction_<field>`` for ``realtime_events``,
``batch_events``, ``event_gap``, ``late_recovered``, ``duplicates_removed``, ``invalid_dropped`` and
``raw_events``, and ``radstack_correction_realtime_metric`` / ``radstack_correction_batch_metric`` with
the metric's name in ``kind``; ``labels`` holds ``interval=…,version=…``. The id of the last one taken
is written in the same publish, so each is ingested once.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from radstack import metrics
from radstack.config import Settings
from radstack.spec import DataSchema, parse_data_schema
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.indexer import index_partition
from radstack.storage.metadata import CorrectionRow, MetadataStore
from radstack.storage.publish import publish
from radstack.time.clock import now_millis
from radstack.time.intervals import Interval, format_instant
from serving.coordinator.duties.base import Duty, DutyContext

log = logging.getLogger(__name__)

__all__ = ["DATASOURCE", "LABEL_DIMENSIONS", "self_metrics_schema", "metrics_rows", "ingest_self_metrics",
           "self_metrics_duty"]

DATASOURCE = "radstack_metrics"
STATE_KEY = "coordinator.self_metrics.last_run_ms"
CORRECTIONS_KEY = "coordinator.self_metrics.last_correction_id"
CORRECTION_FIELDS = ("realtime_events", "batch_events", "event_gap", "late_recovered", "duplicates_removed",
                     "invalid_dropped", "raw_events")
LABEL_DIMENSIONS = ("datasource", "topic", "type", "code", "state", "duty", "outcome", "kind", "runner")


def self_metrics_schema(data_source: str = DATASOURCE) -> DataSchema:
    return parse_data_schema({
        "dataSource": data_source,
        "timestampSpec": {"column": "timestamp", "format": "millis"},
        "dimensionsSpec": {"dimensions": ["metric", "labels", "host", *LABEL_DIMENSIONS]},
        "metricsSpec": [
            {"type": "count", "name": "count"},
            {"type": "doubleSum", "name": "value_sum", "fieldName": "value"},
            {"type": "doubleMin", "name": "value_min", "fieldName": "value"},
            {"type": "doubleMax", "name": "value_max", "fieldName": "value"},
        ],
        "granularitySpec": {"segmentGranularity": "HOUR", "queryGranularity": "MINUTE", "rollup": True},
    })


def metrics_rows(now_ms: int, registry: Any = None, host: str | None = None,
                 corrections: Sequence[CorrectionRow] = ()) -> pa.Table:  # fmt: skip
    """The registry's current samples (and ``corrections``) as input rows."""
    host = host or socket.gethostname()
    cols: dict[str, list[Any]] = {k: [] for k in ("timestamp", "metric", "labels", "host", "value", *LABEL_DIMENSIONS)}

    def add(name: str, labels: dict[str, str], value: float) -> None:
        cols["timestamp"].append(now_ms)
        cols["metric"].append(name)
        cols["labels"].append(",".join(f"{k}={v}" for k, v in sorted(labels.items())))
        cols["host"].append(host)
        cols["value"].append(float(value))
        for k in LABEL_DIMENSIONS:
            cols[k].append(labels.get(k))

    for family in (registry or metrics.REGISTRY).collect():
        for s in family.samples:
            if not (s.name.endswith("_bucket") or s.name.endswith("_created")):
                add(s.name, dict(s.labels), s.value)
    for c in corrections:
        where = {"datasource": c.datasource, "interval": Interval(c.start, c.end).iso(), "version": c.version,
                 **({"served_by": c.served_by} if c.served_by != "radstack" else {})}
        for f in CORRECTION_FIELDS:
            if (v := getattr(c, f)) is not None:
                add(f"radstack_correction_{f}", where, v)
        for side, values in (("realtime", c.realtime_metrics), ("batch", c.batch_metrics)):
            for name, v in values.items():
                add(f"radstack_correction_{side}_metric", {**where, "kind": name}, v)
    types = {"timestamp": pa.int64(), "value": pa.float64()}
    return pa.table({k: pa.array(v, types.get(k, pa.string())) for k, v in cols.items()})


def ingest_self_metrics(metadata: MetadataStore, deep_storage: DeepStorage, *, now_ms: int | None = None,
                        data_source: str = DATASOURCE, registry: Any = None) -> int:
    """Append one snapshot of the metrics to ``data_source``; returns the rows indexed."""

    now = now_millis() if now_ms is None else now_ms
    schema = self_metrics_schema(data_source)
    fixes = metadata.corrections(after_id=int(metadata.get_state(CORRECTIONS_KEY) or 0), limit=10_000)
    table = metrics_rows(now, registry, corrections=fixes)
    if table.num_rows == 0:
        return 0
    hour = schema.segment_granularity.bucket(now)
    same = [s for s in metadata.segments(data_source, used=True, interval=hour) if s.interval == hour]
    version = max((s.version for s in same), default=format_instant(hour.start))
    next_pn = max((s.partition_num for s in same if s.version == version), default=-1) + 1
    result = index_partition(table, schema, version=version, deep_storage=deep_storage, shard="append",
                             partition_offset={hour: next_pn})
    publish(metadata, deep_storage, result.segments,
            state={CORRECTIONS_KEY: fixes[-1].id} if fixes else None)  # each correction ingested once
    return result.num_rows


def self_metrics_duty(metadata: MetadataStore, deep_storage: DeepStorage, settings: Settings, *, now_ms: int | None = None) -> int:
    if not bool(settings.coordinator.self_metrics.on):
        return 0
    now = now_millis() if now_ms is None else now_ms
    period_ms = int(float(settings.coordinator.self_metrics.period_seconds or 0) * 1000)
    last = metadata.get_state(STATE_KEY)
    if last is not None and now - int(last) < period_ms:
        return 0
    metadata.put_state(STATE_KEY, now)
    ds = str(settings.coordinator.self_metrics.datasource or DATASOURCE)
    return ingest_self_metrics(metadata, deep_storage, now_ms=now, data_source=ds)


def _run(ctx: DutyContext) -> int:
    assert ctx.deep_storage is not None
    return self_metrics_duty(ctx.metadata, ctx.deep_storage, ctx.settings, now_ms=ctx.now_ms)


DUTY = Duty("self_metrics", _run, needs_deep_storage=True)
