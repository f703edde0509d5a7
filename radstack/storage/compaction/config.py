"""The compaction config (Druid's ``DataSourceCompactionConfig`` with radstack's tiers), stored in ``druid_config``."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from radstack.spec import TIME_COLUMN, MetricSpec, SpecError, parse_data_schema
from radstack.storage.metadata import MetadataStore
from radstack.time.granularity import Granularity, GranularityError
from radstack.time.intervals import (
    Period,
    TimeParseError,
    datetime_to_ms,
    ms_to_datetime,
)

log = logging.getLogger(__name__)


CONFIG_NAME = "coordinator.compaction.config"
STATE_KEY = "coordinator.compaction.last_run_ms"
DEFAULT_SKIP_OFFSET = "P1D"
DEFAULT_WINDOW_PERIOD = "PT10M"
DEFAULT_MAX_ROWS = 5_000_000


class CompactionError(ValueError):
    """A compaction config or run that cannot be used; the message says why."""


class CompactionConflictError(CompactionError):
    """The interval's visible segments changed while it was being compacted: nothing was published."""


def minus_period(now_ms: int, period: Period) -> int:
    return datetime_to_ms(period.add_to(ms_to_datetime(now_ms), -1))


def parse_period_field(value: Any, path: str) -> Period:
    if not isinstance(value, str):
        raise CompactionError(f"{path}: expected an ISO period such as P1D, got {value!r}")
    try:
        return Period.parse(value)
    except (TimeParseError, ValueError) as e:
        raise CompactionError(f"{path}: {e}") from e


def parse_granularity_field(value: Any, path: str) -> Granularity:
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
        return now_ms if self.older_than is None else minus_period(now_ms, self.older_than)

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
            return (
                Granularity.parse(g.get("segmentGranularity")) == self.segment_granularity
                and Granularity.parse(g.get("queryGranularity")) == self.query_granularity
            )
        except (GranularityError, ValueError, TypeError):
            return False


def _parse_tier(raw: Any, path: str, older_than_required: bool) -> CompactionTier:
    if not isinstance(raw, Mapping):
        raise CompactionError(f"{path}: expected an object")
    older = raw.get("olderThan")
    if older is None and older_than_required:
        raise CompactionError(f"{path}.olderThan: required (an ISO period such as P1D)")
    seg = parse_granularity_field(raw.get("segmentGranularity", "DAY"), f"{path}.segmentGranularity")
    qg = parse_granularity_field(raw.get("queryGranularity", "NONE"), f"{path}.queryGranularity")
    if seg.is_none:
        raise CompactionError(f"{path}.segmentGranularity: NONE is not a segment granularity")
    if not seg.is_all and qg.approx_millis() > seg.approx_millis():
        raise CompactionError(
            f"{path}: queryGranularity {qg.to_json()} is coarser than segmentGranularity {seg.to_json()}"
        )
    rollup = raw.get("rollup")
    if rollup is not None and not isinstance(rollup, bool):
        raise CompactionError(f"{path}.rollup: expected true or false")
    return CompactionTier(
        None if older is None else parse_period_field(older, f"{path}.olderThan"), seg, qg, rollup
    )


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
        skip = parse_period_field(
            raw.get("skipOffsetFromLatest") or DEFAULT_SKIP_OFFSET, "skipOffsetFromLatest"
        )
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
                schema = parse_data_schema(
                    {
                        "dataSource": ds,
                        "timestampSpec": {"column": TIME_COLUMN, "format": "millis"},
                        "dimensionsSpec": raw.get("dimensionsSpec") or {"dimensions": []},
                        "metricsSpec": raw.get("metricsSpec") or [],
                    }
                )
            except SpecError as e:
                raise CompactionError(str(e)) from e
            metrics_spec = schema.metrics if raw.get("metricsSpec") is not None else None
            dims = schema.dimensions if schema.dimensions else None
        max_rows = DEFAULT_MAX_ROWS
        tuning = raw.get("tuningConfig") or {}
        if isinstance(tuning, Mapping):
            ps = tuning.get("partitionsSpec") or {}
            value = (ps.get("maxRowsPerSegment") if isinstance(ps, Mapping) else None) or raw.get(
                "maxRowsPerSegment"
            )
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise CompactionError(f"maxRowsPerSegment: expected a positive integer, got {value!r}")
                max_rows = value
        return cls(ds, skip, tuple(tiers), metrics_spec, dims, max_rows, dict(raw))

    def to_json(self) -> dict[str, Any]:
        out = {
            "dataSource": self.data_source,
            "taskPriority": 25,
            "inputSegmentSizeBytes": 100_000_000_000_000,
            "maxRowsPerSegment": None,
            "skipOffsetFromLatest": self.skip_offset.iso(),
            "tuningConfig": None,
            "taskContext": None,
        }
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
