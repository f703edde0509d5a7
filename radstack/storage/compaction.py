"""Tiered rollup compaction: rewrite old intervals as fewer, coarser, higher-version segments.

**Config** (Druid's ``DataSourceCompactionConfig`` shape, stored in ``druid_config`` under
``coordinator.compaction.config`` as Druid's ``CoordinatorCompactionConfig``)::

    {"dataSource": "ads", "skipOffsetFromLatest": "P1D",
     "granularitySpec": {"segmentGranularity": "DAY", "queryGranularity": "HOUR", "rollup": true},
     "tuningConfig": {"partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 5000000}},
     "metricsSpec": [...],                      # optional: how to combine the metrics
     "tiers": [                                 # radstack: older data → coarser rollup
        {"olderThan": "P1D",  "queryGranularity": "HOUR", "segmentGranularity": "DAY"},
        {"olderThan": "P30D", "queryGranularity": "DAY",  "segmentGranularity": "MONTH"}]}

A top-level ``granularitySpec`` is a tier with no age limit. For each tier (the oldest first), every
``segmentGranularity`` bucket that ended at least ``olderThan`` ago — and before the latest data's end
minus ``skipOffsetFromLatest``, and more than the datasource's ``windowPeriod`` ago (the streaming job
can still append to it otherwise) — is compacted unless its visible segments already are exactly one
compacted set of that tier (``lastCompactionState``). Buckets a coarser tier owns are left to it.

**Running** one interval: read the segments visible in the timeline for it (each clipped to where it
is visible), re-roll them at the tier's granularities through the shared indexer with the metrics'
*combining* aggregators (a ``count`` becomes a ``longSum`` of the count column), check every metric
total (sums equal, min/max equal), and publish with version = the compaction's start time (raised
above every version of the datasource) in ONE transaction: the new set overshadows the detailed one
atomically. The overshadowed inputs are marked unused later by the coordinator's overshadow duty.
Small intervals run in-process (pyarrow + DuckDB); large ones as a Spark job
(:mod:`batch.compaction_job`). A publish is refused if the interval's visible segments changed while
the compaction ran.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from radstack import metrics
from radstack.config import Settings
from radstack.datasources import load_catalog
from radstack.spec import TIME_COLUMN, DataSchema, DimensionSchema, MetricSpec, SpecError, parse_data_schema
from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.indexer import index_partition
from radstack.storage.metadata import MetadataStore
from radstack.storage.publish import publish
from radstack.storage.segment_format import arrow_type, read_segment_table, value_type_of
from radstack.storage.segments import DataSegment
from radstack.storage.timeline import VersionedIntervalTimeline, VisibleSegment
from radstack.time.clock import now_millis
from radstack.time.granularity import Granularity, GranularityError
from radstack.time.intervals import (
    Interval,
    Period,
    TimeParseError,
    datetime_to_ms,
    format_instant,
    ms_to_datetime,
    parse_instant,
)

log = logging.getLogger(__name__)

__all__ = [
    "CONFIG_NAME",
    "CompactionError",
    "CompactionConflictError",
    "CompactionTier",
    "CompactionConfig",
    "CompactionPlan",
    "CompactionResult",
    "load_compaction_configs",
    "compaction_config_document",
    "save_compaction_config",
    "delete_compaction_config",
    "plan_compaction",
    "compaction_schema",
    "run_compaction",
    "compact_datasource",
    "compaction_duty",
]

CONFIG_NAME = "coordinator.compaction.config"
STATE_KEY = "coordinator.compaction.last_run_ms"
DEFAULT_SKIP_OFFSET = "P1D"
DEFAULT_WINDOW_PERIOD = "PT10M"
DEFAULT_MAX_ROWS = 5_000_000


class SparkCompaction(Protocol):
    """What a Spark compaction run returns (:class:`batch.compaction_job.SparkCompactionOutput`)."""

    segments: list[DataSegment]
    schema: DataSchema
    rows_in: int
    totals_in: dict[str, Any]


class SparkCompactor(Protocol):
    """Compacts one planned interval on Spark without publishing: batch/'s
    :func:`batch.compaction_job.compact_with_spark`, handed in by the process that composes the layers."""

    def __call__(self, plan: CompactionPlan, config: CompactionConfig, metric_specs: Sequence[MetricSpec], *,
                 deep_storage: DeepStorage, settings: Settings, version: str, rollup: bool, spark: Any = None) -> SparkCompaction: ...


class CompactionError(ValueError):
    """A compaction config or run that cannot be used; the message says why."""


class CompactionConflictError(CompactionError):
    """The interval's visible segments changed while it was being compacted: nothing was published."""



def _minus(now_ms: int, period: Period) -> int:
    return datetime_to_ms(period.add_to(ms_to_datetime(now_ms), -1))


def _period(value: Any, path: str) -> Period:
    if not isinstance(value, str):
        raise CompactionError(f"{path}: expected an ISO period such as P1D, got {value!r}")
    try:
        return Period.parse(value)
    except (TimeParseError, ValueError) as e:
        raise CompactionError(f"{path}: {e}") from e


def _gran(value: Any, path: str) -> Granularity:
    try:
        return Granularity.parse(value)
    except (GranularityError, ValueError) as e:
        raise CompactionError(f"{path}: {e}") from e


# ---- config -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompactionTier:
    older_than: Period | None  # None: no age limit (Druid's plain granularitySpec)
    segment_granularity: Granularity
    query_granularity: Granularity
    rollup: bool | None = None

    def cutoff(self, now_ms: int) -> int:
        """Buckets must end at or before this instant."""
        return now_ms if self.older_than is None else _minus(now_ms, self.older_than)

    def granularity_json(self, rollup: bool) -> dict[str, Any]:
        return {
            "type": "uniform",
            "segmentGranularity": self.segment_granularity.to_json(),
            "queryGranularity": self.query_granularity.to_json(),
            "rollup": rollup,
        }

    def matches(self, state: Mapping[str, Any] | None) -> bool:
        """Whether a segment's ``lastCompactionState`` was produced by this tier."""
        if not isinstance(state, Mapping):
            return False
        g = state.get("granularitySpec") or {}
        try:
            return (Granularity.parse(g.get("segmentGranularity")) == self.segment_granularity
                    and Granularity.parse(g.get("queryGranularity")) == self.query_granularity)
        except (GranularityError, ValueError, TypeError):
            return False


def _parse_tier(raw: Any, path: str, older_than_required: bool) -> CompactionTier:
    if not isinstance(raw, Mapping):
        raise CompactionError(f"{path}: expected an object")
    older = raw.get("olderThan")
    if older is None and older_than_required:
        raise CompactionError(f"{path}.olderThan: required (an ISO period such as P1D)")
    seg = _gran(raw.get("segmentGranularity", "DAY"), f"{path}.segmentGranularity")
    qg = _gran(raw.get("queryGranularity", "NONE"), f"{path}.queryGranularity")
    if seg.is_none:
        raise CompactionError(f"{path}.segmentGranularity: NONE is not a segment granularity")
    if not seg.is_all and qg.approx_millis() > seg.approx_millis():
        raise CompactionError(f"{path}: queryGranularity {qg.to_json()} is coarser than segmentGranularity "
                              f"{seg.to_json()}")
    rollup = raw.get("rollup")
    if rollup is not None and not isinstance(rollup, bool):
        raise CompactionError(f"{path}.rollup: expected true or false")
    return CompactionTier(None if older is None else _period(older, f"{path}.olderThan"), seg, qg, rollup)


@dataclass(frozen=True)
class CompactionConfig:
    data_source: str
    skip_offset: Period
    tiers: tuple[CompactionTier, ...]
    metrics_spec: tuple[MetricSpec, ...] | None = None
    dimensions: tuple[Any, ...] | None = None  # DimensionSchema
    max_rows_per_segment: int = DEFAULT_MAX_ROWS
    raw: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def from_json(cls, raw: Any) -> CompactionConfig:
        if not isinstance(raw, Mapping):
            raise CompactionError("the compaction config must be a JSON object")
        ds = raw.get("dataSource")
        if not isinstance(ds, str) or not ds.strip():
            raise CompactionError("dataSource: required")
        skip = _period(raw.get("skipOffsetFromLatest") or DEFAULT_SKIP_OFFSET, "skipOffsetFromLatest")
        tiers: list[CompactionTier] = []
        if raw.get("granularitySpec") is not None:
            tiers.append(_parse_tier(raw["granularitySpec"], "granularitySpec", older_than_required=False))
        raw_tiers = raw.get("tiers") or []
        if not isinstance(raw_tiers, list):
            raise CompactionError("tiers: expected an array")
        tiers += [_parse_tier(t, f"tiers[{i}]", older_than_required=True) for i, t in enumerate(raw_tiers)]
        if not tiers:
            raise CompactionError("granularitySpec or tiers: at least one is required")
        metrics_spec = dims = None
        if raw.get("metricsSpec") is not None or raw.get("dimensionsSpec") is not None:
            try:
                schema = parse_data_schema({
                    "dataSource": ds, "timestampSpec": {"column": TIME_COLUMN, "format": "millis"},
                    "dimensionsSpec": raw.get("dimensionsSpec") or {"dimensions": []},
                    "metricsSpec": raw.get("metricsSpec") or [],
                })
            except SpecError as e:
                raise CompactionError(str(e)) from e
            metrics_spec = schema.metrics if raw.get("metricsSpec") is not None else None
            dims = schema.dimensions if schema.dimensions else None
        max_rows = DEFAULT_MAX_ROWS
        tuning = raw.get("tuningConfig") or {}
        if isinstance(tuning, Mapping):
            ps = tuning.get("partitionsSpec") or {}
            value = (ps.get("maxRowsPerSegment") if isinstance(ps, Mapping) else None) or raw.get("maxRowsPerSegment")
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise CompactionError(f"maxRowsPerSegment: expected a positive integer, got {value!r}")
                max_rows = value
        return cls(ds, skip, tuple(tiers), metrics_spec, dims, max_rows, dict(raw))

    def to_json(self) -> dict[str, Any]:
        out = {"dataSource": self.data_source, "taskPriority": 25, "inputSegmentSizeBytes": 100_000_000_000_000,
               "maxRowsPerSegment": None, "skipOffsetFromLatest": self.skip_offset.iso(), "tuningConfig": None,
               "taskContext": None}
        out.update(self.raw)
        return out

    def tiers_oldest_first(self, now_ms: int) -> list[CompactionTier]:
        return sorted(self.tiers, key=lambda t: t.cutoff(now_ms))


def compaction_config_document(metadata: MetadataStore) -> dict[str, Any]:
    """Druid's ``CoordinatorCompactionConfig`` (what ``GET /config/compaction`` returns)."""
    doc = metadata.get_config(CONFIG_NAME) or {}
    return {
        "compactionConfigs": list(doc.get("compactionConfigs") or []),
        "compactionTaskSlotRatio": doc.get("compactionTaskSlotRatio", 0.1),
        "maxCompactionTaskSlots": doc.get("maxCompactionTaskSlots", 2147483647),
        "useAutoScaleSlots": doc.get("useAutoScaleSlots", False),
    }


def load_compaction_configs(metadata: MetadataStore) -> dict[str, CompactionConfig]:
    out: dict[str, CompactionConfig] = {}
    for raw in compaction_config_document(metadata)["compactionConfigs"]:
        try:
            cfg = CompactionConfig.from_json(raw)
        except CompactionError as e:
            log.error("ignoring a bad stored compaction config %r: %s", raw, e)
            continue
        out[cfg.data_source] = cfg
    return out


def save_compaction_config(metadata: MetadataStore, raw: Mapping[str, Any]) -> CompactionConfig:
    """Validate and store (replace) one datasource's config."""
    cfg = CompactionConfig.from_json(raw)
    doc = compaction_config_document(metadata)
    doc["compactionConfigs"] = [c for c in doc["compactionConfigs"] if c.get("dataSource") != cfg.data_source]
    doc["compactionConfigs"].append(cfg.to_json())
    metadata.set_config(CONFIG_NAME, doc)
    return cfg


def delete_compaction_config(metadata: MetadataStore, data_source: str) -> bool:
    doc = compaction_config_document(metadata)
    kept = [c for c in doc["compactionConfigs"] if c.get("dataSource") != data_source]
    if len(kept) == len(doc["compactionConfigs"]):
        return False
    doc["compactionConfigs"] = kept
    metadata.set_config(CONFIG_NAME, doc)
    return True


# ---- planning ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompactionPlan:
    data_source: str
    interval: Interval
    tier: CompactionTier
    inputs: tuple[VisibleSegment, ...]

    @property
    def input_rows(self) -> int:
        return sum(v.segment.num_rows for v in self.inputs)

    @property
    def input_ids(self) -> tuple[str, ...]:
        return tuple(sorted({v.segment.identifier for v in self.inputs}))

    def to_json(self) -> dict[str, Any]:
        return {
            "dataSource": self.data_source, "interval": self.interval.iso(),
            "segmentGranularity": self.tier.segment_granularity.to_json(),
            "queryGranularity": self.tier.query_granularity.to_json(),
            "olderThan": None if self.tier.older_than is None else self.tier.older_than.iso(),
            "inputSegments": len(self.input_ids), "inputRows": self.input_rows,
        }


def _already_compacted(holders: Sequence[Any], bucket: Interval, tier: CompactionTier) -> bool:
    if len(holders) != 1:
        return False
    h = holders[0]
    return h.true_interval == bucket and h.interval == bucket and all(
        tier.matches(s.last_compaction_state) for s in h.segments)


def plan_compaction(
    segments: Sequence[DataSegment],
    config: CompactionConfig,
    *,
    now_ms: int,
    window_period: Period | None = None,
) -> list[CompactionPlan]:
    """Intervals of ``config.data_source`` to compact now, newest first (Druid's policy), given its
    used ``segments``."""
    segs = [s for s in segments if s.data_source == config.data_source]
    data = [s for s in segs if not s.is_tombstone]
    if not data:
        return []
    tl = VersionedIntervalTimeline.from_segments(segs, config.data_source)
    visible = [iv for iv in tl.visible_intervals()]
    if not visible:
        return []
    lo, hi = min(iv.start for iv in visible), max(iv.end for iv in visible)
    latest_end = max(s.interval.end for s in data)
    skip_end = _minus(latest_end, config.skip_offset)
    window = Period.parse(DEFAULT_WINDOW_PERIOD) if window_period is None else window_period
    stream_end = _minus(now_ms, window)  # a bucket must end at or before this (end + windowPeriod <= now)
    owned: list[Interval] = []  # buckets a coarser (older) tier handles
    plans: list[CompactionPlan] = []
    for tier in config.tiers_oldest_first(now_ms):  # largest olderThan (oldest cutoff) first
        limit = min(tier.cutoff(now_ms), skip_end, stream_end)
        if limit <= lo:
            continue
        for bucket in tier.segment_granularity.iterate(Interval(lo, min(hi, limit))):
            if bucket.end > limit:
                continue
            if any(o.overlaps(bucket) for o in owned):
                continue
            owned.append(bucket)
            holders = [h for h in tl.lookup(bucket) if h.has_data]
            if not holders or _already_compacted(holders, bucket, tier):
                continue
            inputs = tuple(VisibleSegment(s, h.interval) for h in holders for s in h.data_segments)
            plans.append(CompactionPlan(config.data_source, bucket, tier, inputs))
    plans.sort(key=lambda p: p.interval.start, reverse=True)
    return plans


# ---- the compaction schema --------------------------------------------------------------------


def resolve_metrics(config: CompactionConfig, settings: Settings, inputs: Sequence[DataSegment]) -> tuple[MetricSpec, ...]:
    """How to combine the metrics: the config's ``metricsSpec``, else the datasource spec in the
    catalog, else an input's ``lastCompactionState.metricsSpec``."""
    if config.metrics_spec is not None:
        return config.metrics_spec
    spec = _catalog_spec(settings, config.data_source)
    if spec is not None and spec.data_schema.metrics:
        return spec.data_schema.metrics
    for seg in inputs:
        state = seg.last_compaction_state or {}
        if state.get("metricsSpec"):
            with contextlib.suppress(SpecError):
                return parse_data_schema({"dataSource": config.data_source,
                                          "metricsSpec": state["metricsSpec"]}).metrics
    names = sorted({m for s in inputs for m in s.metrics})
    if not names:
        return ()
    raise CompactionError(
        f"cannot tell how to combine the metrics {', '.join(names)} of {config.data_source}: add a metricsSpec "
        "to its compaction config or a datasource spec to the catalog")


def _catalog_spec(settings: Settings, data_source: str) -> Any:
    if settings is None:
        return None
    try:

        return load_catalog(settings).get(data_source)
    except Exception as e:  # noqa: BLE001 - a broken catalog file must not stop compaction of others
        log.warning("compaction: could not read the datasource catalog: %s", e)
        return None


def window_period_of(settings: Settings, data_source: str) -> Period:
    spec = _catalog_spec(settings, data_source)
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
        "dimensionsSpec": {"dimensions": [DimensionSchema.of_value_type(n, t).to_json() for n, t in dimensions]},
        "metricsSpec": [m.combining().to_json() for m in metrics_spec],
        "granularitySpec": tier.granularity_json(rollup),
    }
    projections = config.raw.get("projections")
    if projections is None:
        spec = _catalog_spec(settings, config.data_source)
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
        "indexSpec": {"bitmap": {"type": "roaring"}, "dimensionCompression": "zstd", "metricCompression": "zstd"},
        "granularitySpec": {
            "segmentGranularity": schema.segment_granularity.to_json(),
            "queryGranularity": schema.query_granularity.to_json(),
            "rollup": schema.rollup,
        },
    }


def resolve_dimensions(
    config: CompactionConfig, settings: Settings, inputs: Sequence[DataSegment],
    arrow_types: Mapping[str, pa.DataType | pa.Field]
) -> list[tuple[str, str]]:
    """``(name, type)`` of the output dimensions: the config's, else the catalog spec's, else the
    inputs' (in first-seen order, newest version first), typed from the files."""
    if config.dimensions:
        return [(d.name, d.value_type) for d in config.dimensions]
    spec = _catalog_spec(settings, config.data_source)
    if spec is not None and spec.data_schema.dimensions:
        return [(d.name, d.value_type) for d in spec.data_schema.dimensions]
    names: list[str] = []
    for seg in sorted(inputs, key=lambda s: s.version, reverse=True):
        for d in seg.dimensions:
            if d not in names:
                names.append(d)
    return [(n, value_type_of(arrow_types[n]) if n in arrow_types else "string") for n in names]


# ---- running ----------------------------------------------------------------------------------


@dataclass
class CompactionResult:
    plan: CompactionPlan
    version: str
    segments: list[DataSegment]
    rows_in: int
    rows_out: int
    runner: str
    totals: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {**self.plan.to_json(), "version": self.version, "segments": [s.identifier for s in self.segments],
                "rowsIn": self.rows_in, "rowsOut": self.rows_out, "runner": self.runner, "totals": self.totals}


def new_version(metadata: MetadataStore, data_source: str, now_ms: int) -> str:
    """The compaction's start time, raised above every version of the datasource."""
    floor = now_ms
    newest = ""
    for seg in metadata.segments(data_source, used=None):
        newest = max(newest, seg.version)
        with contextlib.suppress(ValueError, TimeParseError):
            floor = max(floor, parse_instant(seg.version) + 1)
    version = format_instant(floor)
    if version <= newest:
        raise CompactionError(f"{data_source}: existing version {newest!r} sorts after any time-based version; "
                              "compaction could never overshadow it")
    return version


def read_input_table(deep_storage: DeepStorage, visible: VisibleSegment, work_dir: Path) -> pa.Table:
    """One input segment's rows inside its visible clip, ``__time`` as int64 millis."""
    seg = visible.segment
    load_spec = seg.load_spec
    if load_spec.get("type") == "local" and Path(str(load_spec.get("path", ""))).is_file():
        table = read_segment_table(str(load_spec["path"]))
    else:
        key = deep_storage.key_for_load_spec(load_spec)
        local = work_dir / f"{abs(hash(seg.identifier))}.parquet"
        deep_storage.download(key, local)
        table = read_segment_table(local)
        local.unlink()
    t = table.column(TIME_COLUMN)
    millis = t.cast(pa.timestamp("ms")).cast(pa.int64()) if pa.types.is_timestamp(t.type) else t.cast(pa.int64())
    table = table.set_column(table.schema.get_field_index(TIME_COLUMN), TIME_COLUMN, millis)
    clip = visible.interval
    mask = pc.and_(pc.greater_equal(millis, clip.start), pc.less(millis, clip.end))
    return table.filter(mask)


def conform(table: pa.Table, dimensions: Sequence[tuple[str, str]], metric_specs: Sequence[MetricSpec]) -> pa.Table:
    """``table`` with exactly ``__time``, the dimensions and the metric columns, in that order and
    type (missing columns as nulls)."""
    n = table.num_rows
    cols: dict[str, pa.Array | pa.ChunkedArray] = {TIME_COLUMN: table.column(TIME_COLUMN).cast(pa.int64())}
    for name, typ in dimensions:
        target = arrow_type(typ)
        if name in table.column_names:
            col = table.column(name)
            if pa.types.is_dictionary(col.type):
                col = col.cast(col.type.value_type)
            cols[name] = col.cast(target)
        else:
            cols[name] = pa.nulls(n, target)
    for m in metric_specs:
        target = arrow_type(m.value_type)
        cols[m.name] = table.column(m.name).cast(target) if m.name in table.column_names else pa.nulls(n, target)
    return pa.table(cols)


def metric_totals(table: pa.Table, metric_specs: Sequence[MetricSpec]) -> dict[str, Any]:
    """Per metric: the sum (count and sums) or the min/max over all rows."""
    out: dict[str, Any] = {}
    for m in metric_specs:
        if m.name not in table.column_names or m.sketch is not None:  # sketches have no total to compare
            out[m.name] = None
            continue
        col = table.column(m.name)
        kind = "sum" if m.kind in ("sum", "count") else m.kind
        out[m.name] = {"sum": pc.sum, "min": pc.min, "max": pc.max}[kind](col).as_py()
    return out


def totals_equal(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    for k in a:
        x, y = a[k], b.get(k)
        if x is None or y is None:
            if (x or 0) != (y or 0):
                return False
        elif isinstance(x, float) or isinstance(y, float):
            if abs(x - y) > 1e-9 * max(1.0, abs(x), abs(y)):
                return False
        elif x != y:
            return False
    return True


def _delete_written(deep_storage: DeepStorage, segments: Sequence[DataSegment]) -> None:
    for seg in segments:
        try:
            key = deep_storage.key_for_load_spec(seg.load_spec)
            deep_storage.delete_prefix(key.rsplit("/", 1)[0] + "/")
        except Exception:  # noqa: BLE001 - the orphan-file collection is the backstop
            log.warning("could not delete files of unpublished compaction output %s", seg.identifier)


def _output_table(deep_storage: DeepStorage, segments: Sequence[DataSegment], work_dir: Path) -> pa.Table:
    tables = [read_input_table(deep_storage, VisibleSegment(s, s.interval), work_dir) for s in segments]
    return pa.concat_tables(tables, promote_options="permissive") if tables else pa.table({})


def run_compaction(
    metadata: MetadataStore,
    deep_storage: DeepStorage,
    plan: CompactionPlan,
    config: CompactionConfig,
    *,
    settings: Settings | None = None,
    runner: str = "inprocess",
    now_ms: int | None = None,
    spark: Any = None,
    spark_compactor: SparkCompactor | None = None,
) -> CompactionResult:
    """Compact one planned interval and publish the result (see the module docstring)."""
    if runner not in ("inprocess", "spark"):
        raise CompactionError(f"runner must be 'inprocess' or 'spark', not {runner!r}")
    started = time.perf_counter()
    now = now_millis() if now_ms is None else now_ms
    version = new_version(metadata, plan.data_source, now)
    input_segments = [v.segment for v in plan.inputs]
    metric_specs = resolve_metrics(config, settings, input_segments)
    spec = _catalog_spec(settings, plan.data_source)
    rollup = plan.tier.rollup if plan.tier.rollup is not None else (spec.data_schema.rollup if spec else True)
    tmp_parent = None
    if settings is not None:
        tmp_parent = Path(settings.home) / "tmp"
        tmp_parent.mkdir(parents=True, exist_ok=True)
    written: list[DataSegment] = []
    try:
        with tempfile.TemporaryDirectory(prefix="radstack-compact-", dir=tmp_parent) as tmp:
            work = Path(tmp)
            if runner == "inprocess":
                tables = [read_input_table(deep_storage, v, work) for v in plan.inputs]
                types: dict[str, pa.Field] = {}
                for t in tables:
                    for f in t.schema:
                        types.setdefault(f.name, f)
                dims = resolve_dimensions(config, settings, input_segments, types)
                schema = compaction_schema(config, plan.tier, metric_specs, dims, rollup=rollup, settings=settings)
                data = pa.concat_tables([conform(t, dims, metric_specs) for t in tables]) if tables else None
                if data is None or data.num_rows == 0:
                    raise CompactionError(f"{plan.data_source} {plan.interval.iso()}: no rows to compact")
                rows_in = data.num_rows
                totals_in = metric_totals(data, metric_specs)

                result = index_partition(data, schema, version=version, deep_storage=deep_storage, shard="core",
                                         max_rows_per_segment=config.max_rows_per_segment, work_dir=work)
                written = list(result.segments)
            else:
                if spark_compactor is None:
                    raise CompactionError("the Spark compaction runner is not available in this process")
                job = spark_compactor(plan, config, metric_specs, deep_storage=deep_storage, settings=settings,
                                         version=version, rollup=rollup, spark=spark)
                written, schema, rows_in, totals_in = job.segments, job.schema, job.rows_in, job.totals_in
            if not written:
                raise CompactionError(f"{plan.data_source} {plan.interval.iso()}: compaction produced no segments")
            bad = [s for s in written if not plan.interval.contains(s.interval)]
            if bad:
                raise CompactionError(f"compaction output {bad[0].identifier} falls outside {plan.interval.iso()}")
            out_table = _output_table(deep_storage, written, work)
            totals_out = metric_totals(out_table, schema.metrics)
            if not totals_equal(totals_in, totals_out):
                raise CompactionError(f"{plan.data_source} {plan.interval.iso()}: metric totals changed "
                                      f"({totals_in} → {totals_out}); nothing was published")
        state = compaction_state(schema, config.max_rows_per_segment)
        written = [replace(s, last_compaction_state=state) for s in written]
        _check_unchanged(metadata, plan)

        publish(metadata, deep_storage, written)
    except BaseException:
        _delete_written(deep_storage, written)
        metrics.COMPACTION_INTERVALS.labels(plan.data_source, "failed").inc()
        raise
    rows_out = sum(s.num_rows for s in written)
    metrics.COMPACTION_INTERVALS.labels(plan.data_source, "success").inc()
    metrics.COMPACTION_ROWS_IN.labels(plan.data_source).inc(rows_in)
    metrics.COMPACTION_ROWS_OUT.labels(plan.data_source).inc(rows_out)
    metrics.COMPACTION_SECONDS.labels(runner).observe(time.perf_counter() - started)
    log.info("compacted %s %s: %d → %d rows in %d segment(s), version %s (%s)", plan.data_source,
             plan.interval.iso(), rows_in, rows_out, len(written), version, runner)
    return CompactionResult(plan, version, written, rows_in, rows_out, runner, {"in": totals_in, "out": totals_out})


def _check_unchanged(metadata: MetadataStore, plan: CompactionPlan) -> None:
    used = metadata.segments(plan.data_source, used=True, interval=plan.interval)
    tl = VersionedIntervalTimeline.from_segments(used, plan.data_source)
    now_ids = tuple(sorted({s.identifier for h in tl.lookup(plan.interval) if h.has_data for s in h.data_segments}))
    if now_ids != plan.input_ids:
        raise CompactionConflictError(
            f"{plan.data_source} {plan.interval.iso()}: its segments changed while compacting; nothing was published")


def choose_runner(settings: Settings, plan: CompactionPlan, requested: str | None = None, *,
                  spark_available: bool = True) -> str:
    """``inprocess`` or ``spark``: the request, else ``coordinator.compaction.runner``; ``auto`` sends
    intervals of at least ``spark_min_rows`` input rows to Spark when this process has a Spark runner."""
    runner = (requested or (settings.coordinator.compaction.runner if settings else "auto")) or "auto"
    if runner == "auto":
        threshold = int(settings.coordinator.compaction.spark_min_rows if settings else 2_000_000)
        return "spark" if spark_available and plan.input_rows >= threshold else "inprocess"
    return str(runner)


def compact_datasource(
    metadata: MetadataStore,
    deep_storage: DeepStorage,
    config: CompactionConfig,
    *,
    settings: Settings | None = None,
    now_ms: int | None = None,
    dry_run: bool = False,
    runner: str | None = None,
    max_intervals: int | None = None,
    interval: Interval | None = None,
    spark_compactor: SparkCompactor | None = None,
) -> tuple[list[CompactionPlan], list[CompactionResult], list[str]]:
    """Plan and (unless ``dry_run``) run compaction for one datasource. Returns (plans, results, errors)."""
    now = now_millis() if now_ms is None else now_ms
    segments = metadata.segments(config.data_source, used=True)
    plans = plan_compaction(segments, config, now_ms=now, window_period=window_period_of(settings, config.data_source))
    if interval is not None:
        plans = [p for p in plans if interval.overlaps(p.interval)]
    metrics.COMPACTION_PENDING.labels(config.data_source).set(len(plans))
    if dry_run:
        return plans, [], []
    results: list[CompactionResult] = []
    errors: list[str] = []
    for plan in plans[: max_intervals if max_intervals is not None else len(plans)]:
        try:
            results.append(run_compaction(
                metadata, deep_storage, plan, config, settings=settings, spark_compactor=spark_compactor,
                runner=choose_runner(settings, plan, runner, spark_available=spark_compactor is not None)))
        except CompactionError as e:
            errors.append(str(e))
            log.error("compaction of %s %s failed: %s", plan.data_source, plan.interval.iso(), e)
    metrics.COMPACTION_PENDING.labels(config.data_source).set(max(0, len(plans) - len(results)))
    return plans, results, errors


def compaction_duty(
    metadata: MetadataStore, deep_storage: DeepStorage, settings: Settings, *, now_ms: int | None = None, force: bool = False,
    spark_compactor: SparkCompactor | None = None,
) -> list[CompactionResult]:
    """The coordinator's compaction pass: every configured datasource, at most
    ``coordinator.compaction.max_intervals_per_run`` intervals each, once per
    ``coordinator.compaction.period_seconds``."""
    if not bool(settings.coordinator.compaction.on):
        return []
    configs = load_compaction_configs(metadata)
    if not configs:
        return []
    now = now_millis() if now_ms is None else now_ms
    period_ms = int(float(settings.coordinator.compaction.period_seconds or 0) * 1000)
    last = metadata.get_state(STATE_KEY)
    if not force and last is not None and now - int(last) < period_ms:
        return []
    metadata.put_state(STATE_KEY, now)
    max_n = int(settings.coordinator.compaction.max_intervals_per_run or 4)
    out: list[CompactionResult] = []
    for ds in sorted(configs):
        try:
            _plans, results, _errors = compact_datasource(metadata, deep_storage, configs[ds], settings=settings,
                                                          now_ms=now, max_intervals=max_n,
                                                          spark_compactor=spark_compactor)
            out += results
        except Exception:  # noqa: BLE001 - one datasource must not stop the others
            log.exception("compaction of %s failed", ds)
    return out
