"""The parsed spec as frozen dataclasses, with the names and types Druid uses."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from radstack.projections import ProjectionSpec
from radstack.sketches import SketchParams
from radstack.time.granularity import Granularity
from radstack.time.intervals import Interval, Period, format_instant
from radstack.user_errors import UserError

TIME_COLUMN = "__time"
TIMESTAMP_FORMATS = ("iso", "millis", "posix", "micro", "nano", "auto", "ruby")
DIMENSION_TYPES = ("string", "long", "float", "double", "json", "auto")
#: ``castToType`` of an ``auto`` dimension → the stored value type (Druid's ARRAY columns, grouped and
#: compared as whole arrays; the scalar types are the plain dimensions of that type)
ARRAY_TYPES: dict[str, str] = {
    "ARRAY<STRING>": "array<string>",
    "ARRAY<LONG>": "array<long>",
    "ARRAY<DOUBLE>": "array<double>",
}
AUTO_SCALARS = {"STRING": "string", "LONG": "long", "DOUBLE": "double", "FLOAT": "float"}
#: metric type → (Arrow/segment value type, combine kind)
METRIC_TYPES: dict[str, tuple[str, str]] = {
    "count": ("long", "count"),
    "longSum": ("long", "sum"),
    "doubleSum": ("double", "sum"),
    "floatSum": ("float", "sum"),
    "longMin": ("long", "min"),
    "longMax": ("long", "max"),
    "doubleMin": ("double", "min"),
    "doubleMax": ("double", "max"),
    "floatMin": ("float", "min"),
    "floatMax": ("float", "max"),
    # Apache DataSketches (radstack/sketches/): a serialized sketch per row, merged on rollup
    "HLLSketchBuild": ("sketch", "sketch"),
    "HLLSketchMerge": ("sketch", "sketch"),
    "thetaSketch": ("sketch", "sketch"),
    "quantilesDoublesSketch": ("sketch", "sketch"),
}
METRIC_TYPES_LOWER = {k.lower(): k for k in METRIC_TYPES}


class SpecError(ValueError, UserError):
    """A datasource spec that cannot be used; the message starts with the bad field's path."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.reason = message
        super().__init__(f"{path}: {message}" if path else message)


@dataclass(frozen=True)
class TimestampSpec:
    column: str = "timestamp"
    format: str = "auto"  # iso | millis | posix | micro | nano | auto | ruby | a Joda pattern
    missing_value: int | None = None  # epoch millis used when the column is absent or null

    @property
    def is_joda(self) -> bool:
        return self.format.lower() not in TIMESTAMP_FORMATS

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"column": self.column, "format": self.format}
        if self.missing_value is not None:
            out["missingValue"] = format_instant(self.missing_value)
        return out


MULTI_VALUE_HANDLING = ("SORTED_ARRAY", "SORTED_SET", "ARRAY")
"""Druid's ``multiValueHandling``: sort the values, sort and drop repeats, or keep their order."""


@dataclass(frozen=True)
class DimensionSchema:
    name: str
    #: string | long | float | double | json, or array<string> | array<long> | array<double> (an
    #: ``auto`` dimension with an ARRAY ``castToType``), or ``auto``: an ``auto`` dimension without
    #: ``castToType``, whose type a native batch task discovers from its rows
    #: (:mod:`radstack.storage.type_discovery`) before any segment is written
    type: str = "string"
    #: set for a multi-value string dimension (stored as a list of strings); one of MULTI_VALUE_HANDLING
    multi_value_handling: str | None = None

    @property
    def value_type(self) -> str:
        """The stored value type: ``multi`` for a multi-value string dimension, else :attr:`type`."""
        return "multi" if self.multi_value_handling else self.type

    @property
    def is_discovered(self) -> bool:
        """An ``auto`` dimension whose type comes from the data (Druid's type-aware discovery)."""
        return self.type == "auto"

    @property
    def is_array(self) -> bool:
        """An ARRAY column: one value per row that is a whole array (unlike a multi-value dimension)."""
        return self.type.startswith("array<")

    @classmethod
    def of_value_type(cls, name: str, value_type: str) -> DimensionSchema:
        """The dimension holding ``value_type`` (a ``multi`` column keeps its stored value order)."""
        return cls(name, "string", "ARRAY") if value_type == "multi" else cls(name, value_type)

    def to_json(self) -> dict[str, Any]:
        if self.is_discovered:
            return {"type": "auto", "name": self.name}
        if self.is_array:
            return {"type": "auto", "name": self.name, "castToType": self.type.upper()}
        out = {"type": self.type, "name": self.name}
        if self.multi_value_handling:
            out["multiValueHandling"] = self.multi_value_handling
        return out


@dataclass(frozen=True)
class MetricSpec:
    """One ingestion-time aggregator of ``metricsSpec``."""

    type: str
    name: str
    field_name: str | None = None
    expression: str | None = None
    sketch: SketchParams | None = None  # the sketch metrics' family and sizes

    @property
    def value_type(self) -> str:
        """``long`` | ``double`` | ``float`` | ``sketch`` (binary): the stored column type."""
        return METRIC_TYPES[self.type][0]

    @property
    def kind(self) -> str:
        """``count`` | ``sum`` | ``min`` | ``max`` | ``sketch``."""
        return METRIC_TYPES[self.type][1]

    @property
    def merges_sketches(self) -> bool:
        """A sketch metric whose input is sketches (merged) rather than raw values (built)."""
        return self.type == "HLLSketchMerge"

    def combining(self) -> MetricSpec:
        """The aggregator that merges values already aggregated by this one (Druid's
        ``getCombiningFactory``): ``count`` → ``longSum`` of the metric, sums and min/max → the same
        type reading the metric column, sketches → merging the metric's sketches."""
        typ = {"count": "longSum", "HLLSketchBuild": "HLLSketchMerge"}.get(self.type, self.type)
        return MetricSpec(type=typ, name=self.name, field_name=self.name, sketch=self.sketch)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "name": self.name}
        if self.field_name is not None:
            out["fieldName"] = self.field_name
        if self.expression is not None:
            out["expression"] = self.expression
        if self.sketch is not None:
            out.update(self.sketch.to_json())
        return out


@dataclass(frozen=True)
class GranularitySpec:
    segment_granularity: Granularity = field(default_factory=lambda: Granularity.parse("day"))
    query_granularity: Granularity = field(default_factory=lambda: Granularity.parse("none"))
    rollup: bool = True
    intervals: tuple[Interval, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "uniform",
            "segmentGranularity": self.segment_granularity.to_json(),
            "queryGranularity": self.query_granularity.to_json(),
            "rollup": self.rollup,
        }
        if self.intervals:
            out["intervals"] = [iv.iso() for iv in self.intervals]
        return out


@dataclass(frozen=True)
class Transform:
    name: str
    expression: str

    def to_json(self) -> dict[str, Any]:
        return {"type": "expression", "name": self.name, "expression": self.expression}


@dataclass(frozen=True)
class DataSchema:
    data_source: str
    timestamp_spec: TimestampSpec = field(default_factory=TimestampSpec)
    dimensions: tuple[DimensionSchema, ...] = ()
    dimension_exclusions: tuple[str, ...] = ()
    metrics: tuple[MetricSpec, ...] = ()
    granularity: GranularitySpec = field(default_factory=GranularitySpec)
    transforms: tuple[Transform, ...] = ()
    transform_filter: dict[str, Any] | None = field(default=None, hash=False)
    projections: tuple[ProjectionSpec, ...] = ()
    #: ``dimensionsSpec.useSchemaDiscovery``: input columns that are not declared become ``auto``
    #: dimensions (typed from the data), after the declared ones
    schema_discovery: bool = False

    # -- conveniences -------------------------------------------------------------------------
    @property
    def segment_granularity(self) -> Granularity:
        return self.granularity.segment_granularity

    @property
    def query_granularity(self) -> Granularity:
        return self.granularity.query_granularity

    @property
    def rollup(self) -> bool:
        return self.granularity.rollup

    @property
    def intervals(self) -> tuple[Interval, ...]:
        return self.granularity.intervals

    @property
    def is_schemaless(self) -> bool:
        return not self.dimensions

    @property
    def needs_discovery(self) -> bool:
        """Whether some dimension's type is known only from the rows (``auto`` without
        ``castToType``, or ``useSchemaDiscovery``): only a native batch task, which sees all its rows
        before writing, can ingest it."""
        return self.schema_discovery or any(d.is_discovered for d in self.dimensions)

    @property
    def dimension_names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.dimensions)

    @property
    def metric_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.metrics)

    def excluded_from_discovery(self) -> set[str]:
        """Columns schemaless discovery never turns into dimensions (Druid's
        ``DataSchema.computeDimensionsSpec``): the timestamp column, ``__time``, the metrics' names and
        input fields, and ``dimensionExclusions``."""
        out = {self.timestamp_spec.column, TIME_COLUMN, *self.dimension_exclusions}
        for m in self.metrics:
            out.add(m.name)
            if m.field_name:
                out.add(m.field_name)
        return out

    def resolve_dimensions(self, input_columns: Iterable[str]) -> tuple[DimensionSchema, ...]:
        """The dimensions for rows with these columns: the declared ones, or — schemaless — every
        column not excluded, as a ``string`` dimension, sorted by name. With ``useSchemaDiscovery``
        the columns not declared follow the declared ones as ``auto`` dimensions."""
        if self.dimensions and not self.schema_discovery:
            return self.dimensions
        excluded = self.excluded_from_discovery() | set(self.dimension_names)
        names = {c for c in input_columns if c not in excluded}
        names.update(t.name for t in self.transforms if t.name not in excluded)
        found = "auto" if self.schema_discovery else "string"
        return self.dimensions + tuple(DimensionSchema(n, found) for n in sorted(names))

    def to_json(self) -> dict[str, Any]:
        """Druid's ``dataSchema`` JSON (for exported ingestion specs)."""
        dims_spec: dict[str, Any] = {
            "dimensions": [d.to_json() for d in self.dimensions],
            "dimensionExclusions": list(self.dimension_exclusions),
        }
        if self.schema_discovery:
            dims_spec["useSchemaDiscovery"] = True
        out: dict[str, Any] = {
            "dataSource": self.data_source,
            "timestampSpec": self.timestamp_spec.to_json(),
            "dimensionsSpec": dims_spec,
            "metricsSpec": [m.to_json() for m in self.metrics],
            "granularitySpec": self.granularity.to_json(),
        }
        if self.transforms or self.transform_filter is not None:
            ts: dict[str, Any] = {"transforms": [t.to_json() for t in self.transforms]}
            if self.transform_filter is not None:
                ts["filter"] = self.transform_filter
            out["transformSpec"] = ts
        if self.projections:
            out["projections"] = [pr.to_json() for pr in self.projections]
        return out


@dataclass(frozen=True)
class JoinSpec:
    """A stream/batch enrichment join (used by later stages); only ``name`` and ``type`` are read
    here, everything else is kept in ``options``."""

    name: str
    type: str = "lookup"
    options: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class LookupSpec:
    """A lookup table (key → value map) used by joins and by ``LOOKUP()`` queries."""

    name: str
    type: str = "map"
    options: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class ProcessingSpec:
    topics: tuple[str, ...] = ()
    event_id: str | None = None
    window_period: Period = field(default_factory=lambda: Period.parse("PT10M"))
    joins: tuple[JoinSpec, ...] = ()
    lookups: tuple[LookupSpec, ...] = ()
    dead_letter_topic: str | None = None
    # set → the streaming job also writes every kept row, before rollup, to this topic (for Druid)
    processed_topic: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class DatasourceSpec:
    data_schema: DataSchema
    processing: ProcessingSpec = field(default_factory=ProcessingSpec)
    source: Path | None = None

    @property
    def name(self) -> str:
        return self.data_schema.data_source
