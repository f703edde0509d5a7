"""The schema a compaction writes: the tier's granularities and the metrics' combining aggregators."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from radstack.config import Settings
from radstack.spec import TIME_COLUMN, DataSchema, DimensionSchema, MetricSpec, SpecError, parse_data_schema
from radstack.storage.compaction.config import (
    DEFAULT_WINDOW_PERIOD,
    CompactionConfig,
    CompactionError,
    CompactionTier,
)
from radstack.storage.segment_format import value_type_of
from radstack.storage.segments import DataSegment
from radstack.storage.supervisors import datasource_catalog
from radstack.time.intervals import (
    Period,
)

log = logging.getLogger(__name__)


def resolve_metrics(
    config: CompactionConfig, settings: Settings, inputs: Sequence[DataSegment]
) -> tuple[MetricSpec, ...]:
    """How to combine the metrics: the config's ``metricsSpec``, else the datasource spec in the
    catalog, else an input's ``lastCompactionState.metricsSpec``."""
    if config.metrics_spec is not None:
        return config.metrics_spec
    spec = catalog_spec(settings, config.data_source)
    if spec is not None and spec.data_schema.metrics:
        return spec.data_schema.metrics
    for seg in inputs:
        state = seg.last_compaction_state or {}
        if state.get("metricsSpec"):
            with contextlib.suppress(SpecError):
                return parse_data_schema(
                    {"dataSource": config.data_source, "metricsSpec": state["metricsSpec"]}
                ).metrics
    names = sorted({m for s in inputs for m in s.metrics})
    if not names:
        return ()
    raise CompactionError(
        f"cannot tell how to combine the metrics {', '.join(names)} of {config.data_source}: add a metricsSpec "
        "to its compaction config or a datasource spec to the catalog"
    )


def catalog_spec(settings: Settings, data_source: str) -> Any:
    if settings is None:
        return None
    try:
        return datasource_catalog(settings).get(data_source)
    except Exception as e:  # noqa: BLE001 - a broken catalog file must not stop compaction of others
        log.warning("compaction: could not read the datasource catalog: %s", e)
        return None


def window_period_of(settings: Settings, data_source: str) -> Period:
    spec = catalog_spec(settings, data_source)
    if spec is not None:
        return spec.processing.window_period
    return Period.parse(DEFAULT_WINDOW_PERIOD)


def compaction_schema(
    config: CompactionConfig,
    tier: CompactionTier,
    metrics_spec: Sequence[MetricSpec],
    dimensions: Sequence[tuple[str, str]],
    *,
    rollup: bool = True,
    settings: Settings | None = None,
) -> DataSchema:
    """The DataSchema the indexer re-rolls with: ``__time`` as millis, the given ``(name, type)``
    dimensions, every metric replaced by its combining aggregator reading its own column, and the
    aggregate projections to build (the compaction config's ``projections``, else the datasource
    spec's; dropped with a warning when they no longer fit the compacted columns)."""
    schema = {
        "dataSource": config.data_source,
        "timestampSpec": {"column": TIME_COLUMN, "format": "millis"},
        "dimensionsSpec": {
            "dimensions": [DimensionSchema.of_value_type(n, t).to_json() for n, t in dimensions]
        },
        "metricsSpec": [m.combining().to_json() for m in metrics_spec],
        "granularitySpec": tier.granularity_json(rollup),
    }
    projections = config.raw.get("projections")
    if projections is None:
        spec = catalog_spec(settings, config.data_source)
        projections = [p.to_json() for p in spec.data_schema.projections] if spec is not None else []
    if projections:
        try:
            return parse_data_schema({**schema, "projections": projections})
        except SpecError as e:
            log.warning("compaction of %s: projections left out: %s", config.data_source, e)
    return parse_data_schema(schema)


def compaction_state(schema: DataSchema, max_rows: int) -> dict[str, Any]:
    """Druid's ``CompactionState`` for ``lastCompactionState``."""
    return {
        "partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": max_rows, "maxTotalRows": None},
        "dimensionsSpec": {"dimensions": [d.to_json() for d in schema.dimensions]},
        "metricsSpec": [m.to_json() for m in schema.metrics],
        "transformSpec": None,
        "indexSpec": {
            "bitmap": {"type": "roaring"},
            "dimensionCompression": "zstd",
            "metricCompression": "zstd",
        },
        "granularitySpec": {
            "segmentGranularity": schema.segment_granularity.to_json(),
            "queryGranularity": schema.query_granularity.to_json(),
            "rollup": schema.rollup,
        },
    }


def resolve_dimensions(
    config: CompactionConfig,
    settings: Settings,
    inputs: Sequence[DataSegment],
    arrow_types: Mapping[str, pa.DataType | pa.Field],
) -> list[tuple[str, str]]:
    """``(name, type)`` of the output dimensions: the config's, else the catalog spec's, else the
    inputs' (in first-seen order, newest version first), typed from the files."""
    if config.dimensions:
        return [(d.name, d.value_type) for d in config.dimensions]
    spec = catalog_spec(settings, config.data_source)
    if spec is not None and spec.data_schema.dimensions:
        return [(d.name, d.value_type) for d in spec.data_schema.dimensions]
    names: list[str] = []
    for seg in sorted(inputs, key=lambda s: s.version, reverse=True):
        for d in seg.dimensions:
            if d not in names:
                names.append(d)
    return [(n, value_type_of(arrow_types[n]) if n in arrow_types else "string") for n in names]
