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
"""

from __future__ import annotations

import logging
import socket
from typing import Any

import pyarrow as pa

from radstack import metrics
from radstack.config import Settings
from radstack.spec import DataSchema, parse_data_schema
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.indexer import index_partition
from radstack.storage.metadata import MetadataStore
from radstack.storage.publish import publish
from radstack.time.clock import now_millis
from radstack.time.intervals import format_instant
from serving.coordinator.duties.base import Duty, DutyContext

log = logging.getLogger(__name__)

__all__ = ["DATASOURCE", "LABEL_DIMENSIONS", "self_metrics_schema", "metrics_rows", "ingest_self_metrics",
           "self_metrics_duty"]

DATASOURCE = "radstack_metrics"
STATE_KEY = "coordinator.self_metrics.last_run_ms"
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


def metrics_rows(now_ms: int, registry: Any = None, host: str | None = None) -> pa.Table:
    """The registry's current samples as input rows."""
    host = host or socket.gethostname()
    cols: dict[str, list[Any]] = {k: [] for k in ("timestamp", "metric", "labels", "host", "value", *LABEL_DIMENSIONS)}
    for family in (registry or metrics.REGISTRY).collect():
        for s in family.samples:
            if s.name.endswith("_bucket") or s.name.endswith("_created"):
                continue
            cols["timestamp"].append(now_ms)
            cols["metric"].append(s.name)
            cols["labels"].append(",".join(f"{k}={v}" for k, v in sorted(s.labels.items())))
            cols["host"].append(host)
            cols["value"].append(float(s.value))
            for k in LABEL_DIMENSIONS:
                cols[k].append(s.labels.get(k))
    types = {"timestamp": pa.int64(), "value": pa.float64()}
    return pa.table({k: pa.array(v, types.get(k, pa.string())) for k, v in cols.items()})


def ingest_self_metrics(metadata: MetadataStore, deep_storage: DeepStorage, *, now_ms: int | None = None,
                        data_source: str = DATASOURCE, registry: Any = None) -> int:
    """Append one snapshot of the metrics to ``data_source``; returns the rows indexed."""

    now = now_millis() if now_ms is None else now_ms
    schema = self_metrics_schema(data_source)
    table = metrics_rows(now, registry)
    if table.num_rows == 0:
        return 0
    hour = schema.segment_granularity.bucket(now)
    same = [s for s in metadata.segments(data_source, used=True, interval=hour) if s.interval == hour]
    version = max((s.version for s in same), default=format_instant(hour.start))
    next_pn = max((s.partition_num for s in same if s.version == version), default=-1) + 1
    result = index_partition(table, schema, version=version, deep_storage=deep_storage, shard="append",
                             partition_offset={hour: next_pn})
    publish(metadata, deep_storage, result.segments)
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


DUTY = Duty("self_metrics", "self_metrics_rows", _run, needs_deep_storage=True)
