"""The datasource spec: Druid's ``dataSchema`` plus radstack's ``processing`` section.

One spec drives the streaming job, the batch job, native batch tasks and the ingestion specs exported
to a real Druid cluster, so it is parsed and validated once, here, into frozen dataclasses.

Accepted inputs (:func:`load_datasource_spec`, :func:`parse_data_schema`):

* a bare Druid ``dataSchema`` object;
* a Druid ingestion spec ``{"type": "index_parallel", "spec": {"dataSchema": …, "ioConfig": …}}``
  (only the ``dataSchema`` is read here; the task API reads ``ioConfig`` itself);
* radstack's datasource spec file (YAML or JSON): ``{"dataSchema": …, "processing": {…}}``.

Druid's defaults apply: ``timestampSpec.column`` ``timestamp``, ``format`` ``auto``;
``segmentGranularity`` ``DAY``, ``queryGranularity`` ``NONE``, ``rollup`` true. An empty dimension
list means schemaless discovery (:meth:`DataSchema.resolve_dimensions`). Every error is a
:class:`SpecError` whose message starts with the path of the bad field, e.g.
``dataSchema.granularitySpec.segmentGranularity: unknown granularity 'fortnight'``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from radstack.expressions import expression_to_sql
from radstack.filters import filter_to_sql
from radstack.projections import ProjectionSpec, ProjectionSpecError, parse_projection
from radstack.sketches import SKETCH_METRICS, SketchParamError, SketchParams, parse_params
from radstack.time.granularity import Granularity, GranularityError
from radstack.time.intervals import Interval, Period, TimeParseError, format_instant, parse_instant
from radstack.time.joda import tokenize

__all__ = [
    "SpecError",
    "TimestampSpec",
    "DimensionSchema",
    "MetricSpec",
    "GranularitySpec",
    "Transform",
    "DataSchema",
    "JoinSpec",
    "LookupSpec",
    "ProcessingSpec",
    "DatasourceSpec",
    "TIME_COLUMN",
    "TIMESTAMP_FORMATS",
    "DIMENSION_TYPES",
    "MULTI_VALUE_HANDLING",
    "ARRAY_TYPES",
    "METRIC_TYPES",
    "parse_data_schema",
    "parse_processing",
    "load_datasource_spec",
]

TIME_COLUMN = "__time"
TIMESTAMP_FORMATS = ("iso", "millis", "posix", "micro", "nano", "auto", "ruby")
DIMENSION_TYPES = ("string", "long", "float", "double", "json", "auto")
#: ``castToType`` of an ``auto`` dimension → the stored value type (Druid's ARRAY columns, grouped and
#: compared as whole arrays; the scalar types are the plain dimensions of that type)
ARRAY_TYPES: dict[str, str] = {"ARRAY<STRING>": "array<string>", "ARRAY<LONG>": "array<long>",
                               "ARRAY<DOUBLE>": "array<double>"}
_AUTO_SCALARS = {"STRING": "string", "LONG": "long", "DOUBLE": "double", "FLOAT": "float"}
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
    # Apache DataSketches (radstack/sketches.py): a serialized sketch per row, merged on rollup
    "HLLSketchBuild": ("sketch", "sketch"),
    "HLLSketchMerge": ("sketch", "sketch"),
    "thetaSketch": ("sketch", "sketch"),
    "quantilesDoublesSketch": ("sketch", "sketch"),
}
_METRIC_TYPES_LOWER = {k.lower(): k for k in METRIC_TYPES}


class SpecError(ValueError):
    """A datasource spec that cannot be used; the message starts with the bad field's path."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.reason = message
        super().__init__(f"{path}: {message}" if path else message)


# ---- dataclasses -------------------------------------------------------------------------------


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
    #: ``auto`` dimension with an ARRAY ``castToType``)
    type: str = "string"
    #: set for a multi-value string dimension (stored as a list of strings); one of MULTI_VALUE_HANDLING
    multi_value_handling: str | None = None

    @property
    def value_type(self) -> str:
        """The stored value type: ``multi`` for a multi-value string dimension, else :attr:`type`."""
        return "multi" if self.multi_value_handling else self.type

    @property
    def is_array(self) -> bool:
        """An ARRAY column: one value per row that is a whole array (unlike a multi-value dimension)."""
        return self.type.startswith("array<")

    @classmethod
    def of_value_type(cls, name: str, value_type: str) -> DimensionSchema:
        """The dimension holding ``value_type`` (a ``multi`` column keeps its stored value order)."""
        return cls(name, "string", "ARRAY") if value_type == "multi" else cls(name, value_type)

    def to_json(self) -> dict[str, Any]:
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
        column not excluded, as a ``string`` dimension, sorted by name."""
        if self.dimensions:
            return self.dimensions
        excluded = self.excluded_from_discovery()
        names = {c for c in input_columns if c not in excluded}
        names.update(t.name for t in self.transforms if t.name not in excluded)
        return tuple(DimensionSchema(n) for n in sorted(names))

    def to_json(self) -> dict[str, Any]:
        """Druid's ``dataSchema`` JSON (for exported ingestion specs)."""
        out: dict[str, Any] = {
            "dataSource": self.data_source,
            "timestampSpec": self.timestamp_spec.to_json(),
            "dimensionsSpec": {
                "dimensions": [d.to_json() for d in self.dimensions],
                "dimensionExclusions": list(self.dimension_exclusions),
            },
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


# ---- parsing helpers -----------------------------------------------------------------------


def _get(m: Mapping[str, Any], *names: str, default: Any = None) -> Any:
    for n in names:
        if n in m:
            return m[n]
    return default


def _mapping(value: Any, path: str, *, allow_none: bool = True) -> Mapping[str, Any]:
    if value is None and allow_none:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(path, f"expected an object, got {type(value).__name__}")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise SpecError(path, f"expected a list, got {type(value).__name__}")
    return list(value)


def _name(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SpecError(path, f"expected a non-empty string, got {value!r}")
    return value


def _bool(value: Any, path: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise SpecError(path, f"expected true or false, got {value!r}")


def _validate_data_source(name: Any, path: str) -> str:
    """Druid's ``IdUtils.validateId``: non-empty, no ``/``, not starting with ``.``, no whitespace
    other than the space."""
    s = _name(name, path)
    if "/" in s:
        raise SpecError(path, f"dataSource {s!r} cannot contain '/'")
    if s.startswith("."):
        raise SpecError(path, f"dataSource {s!r} cannot start with '.'")
    if re.search(r"[^\S ]", s):
        raise SpecError(path, f"dataSource {s!r} cannot contain whitespace other than space")
    return s


def _granularity(value: Any, path: str, default: str) -> Granularity:
    if value is None:
        value = default
    try:
        return Granularity.parse(value)
    except GranularityError as e:
        raise SpecError(path, str(e)) from e


def _instant(value: Any, path: str) -> int:
    if isinstance(value, bool):
        raise SpecError(path, f"expected a timestamp, got {value!r}")
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, str):
        s = value.strip()
        if re.fullmatch(r"-?\d{5,}", s):
            return int(s)
        try:
            return parse_instant(s)
        except TimeParseError as e:
            raise SpecError(path, str(e)) from e
    raise SpecError(path, f"expected a timestamp, got {value!r}")


# ---- dataSchema ------------------------------------------------------------------------------


def _unwrap_data_schema(mapping: Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
    """Find the ``dataSchema`` object in any accepted shape; returns it and its path."""
    if "spec" in mapping and isinstance(mapping["spec"], Mapping) and "dataSchema" in mapping["spec"]:
        return _mapping(mapping["spec"]["dataSchema"], "spec.dataSchema", allow_none=False), "spec.dataSchema"
    if "dataSchema" in mapping:
        return _mapping(mapping["dataSchema"], "dataSchema", allow_none=False), "dataSchema"
    if "type" in mapping and "spec" in mapping:
        raise SpecError("spec.dataSchema", "missing")
    return mapping, "dataSchema"


def parse_data_schema(mapping: Mapping[str, Any]) -> DataSchema:
    """Parse a bare ``dataSchema``, an ingestion spec (``{"type","spec":{"dataSchema"…}}``) or a
    radstack datasource spec (``{"dataSchema", "processing"}``) into a :class:`DataSchema`."""
    if isinstance(mapping, DataSchema):
        return mapping
    root = _mapping(mapping, "", allow_none=False)
    ds, p = _unwrap_data_schema(root)

    data_source = _validate_data_source(_get(ds, "dataSource"), f"{p}.dataSource")

    # Druid's legacy layout keeps timestampSpec/dimensionsSpec under parser.parseSpec.
    parse_spec = _mapping(_mapping(ds.get("parser"), f"{p}.parser").get("parseSpec"), f"{p}.parser.parseSpec")
    ts_raw = ds.get("timestampSpec", parse_spec.get("timestampSpec"))
    dims_raw = ds.get("dimensionsSpec", parse_spec.get("dimensionsSpec"))

    timestamp_spec = _parse_timestamp_spec(ts_raw, f"{p}.timestampSpec")
    metrics = _parse_metrics(ds.get("metricsSpec"), f"{p}.metricsSpec")
    dimensions, exclusions = _parse_dimensions(dims_raw, f"{p}.dimensionsSpec")
    gran = _parse_granularity_spec(ds.get("granularitySpec"), f"{p}.granularitySpec")
    transforms, tfilter = _parse_transform_spec(ds.get("transformSpec"), f"{p}.transformSpec")

    # Names must not collide: dimensions vs metrics vs __time (Druid rejects the same).
    seen: dict[str, str] = {}
    for i, d in enumerate(dimensions):
        dp = f"{p}.dimensionsSpec.dimensions[{i}]"
        if d.name == TIME_COLUMN:
            raise SpecError(dp, f"'{TIME_COLUMN}' cannot be a dimension")
        if d.name in seen:
            raise SpecError(dp, f"duplicate column name {d.name!r}")
        seen[d.name] = dp
    for i, m in enumerate(metrics):
        mp = f"{p}.metricsSpec[{i}].name"
        if m.name == TIME_COLUMN:
            raise SpecError(mp, f"'{TIME_COLUMN}' cannot be a metric name")
        if m.name in seen:
            raise SpecError(mp, f"{m.name!r} is already used by {seen[m.name]}")
        seen[m.name] = mp
    overlap = sorted(set(exclusions) & {d.name for d in dimensions})
    if overlap:
        raise SpecError(
            f"{p}.dimensionsSpec.dimensionExclusions",
            f"{', '.join(overlap)} cannot be both a dimension and excluded",
        )

    projections = _parse_projections(ds.get("projections"), f"{p}.projections", dimensions, metrics, gran)

    return DataSchema(
        data_source=data_source,
        timestamp_spec=timestamp_spec,
        dimensions=tuple(dimensions),
        dimension_exclusions=tuple(exclusions),
        metrics=tuple(metrics),
        granularity=gran,
        transforms=tuple(transforms),
        transform_filter=tfilter,
        projections=projections,
    )


def _parse_projections(
    raw: Any, p: str, dimensions: Sequence[DimensionSchema], metrics: Sequence[MetricSpec], gran: GranularitySpec
) -> tuple[ProjectionSpec, ...]:
    out: list[ProjectionSpec] = []
    value_types = {m.name: m.value_type for m in metrics}
    for i, raw_projection in enumerate(_list(raw, p)):
        try:
            pr = parse_projection(
                raw_projection, f"{p}[{i}]", dimensions=[d.name for d in dimensions] or None, metrics=value_types,
                segment_granularity=gran.segment_granularity, query_granularity=gran.query_granularity,
            )
        except ProjectionSpecError as e:
            raise SpecError(e.path, e.message) from e
        if any(o.name == pr.name for o in out):
            raise SpecError(f"{p}[{i}].name", f"duplicate projection name {pr.name!r}")
        multi = [d.name for d in dimensions if d.multi_value_handling and d.name in pr.dimensions]
        if multi:
            raise SpecError(f"{p}[{i}].groupingColumns",
                            f"{', '.join(multi)}: a projection cannot group by a multi-value dimension")
        out.append(pr)
    return tuple(out)


def _parse_timestamp_spec(raw: Any, p: str) -> TimestampSpec:
    m = _mapping(raw, p)
    column = m.get("column", "timestamp")
    column = _name(column, f"{p}.column")
    fmt = m.get("format", "auto")
    fmt = _name(fmt, f"{p}.format")
    if fmt.lower() in TIMESTAMP_FORMATS:
        fmt = fmt.lower()
    else:
        _validate_joda(fmt, f"{p}.format")
    missing = m.get("missingValue")
    missing_ms = None if missing is None else _instant(missing, f"{p}.missingValue")
    return TimestampSpec(column=column, format=fmt, missing_value=missing_ms)


def _validate_joda(fmt: str, path: str) -> None:
    try:
        tokens = tokenize(fmt)
    except ValueError as e:
        raise SpecError(path, f"unknown timestamp format {fmt!r}: {e}") from e
    if not any(not t.is_literal for t in tokens):
        raise SpecError(
            path,
            f"unknown timestamp format {fmt!r}: expected one of {', '.join(TIMESTAMP_FORMATS)} or a Joda pattern",
        )


def _parse_dimensions(raw: Any, p: str) -> tuple[list[DimensionSchema], list[str]]:
    m = _mapping(raw, p)
    dims: list[DimensionSchema] = []
    for i, d in enumerate(_list(m.get("dimensions"), f"{p}.dimensions")):
        dp = f"{p}.dimensions[{i}]"
        if isinstance(d, str):
            dims.append(DimensionSchema(_name(d, dp)))
            continue
        dm = _mapping(d, dp, allow_none=False)
        name = _name(dm.get("name"), f"{dp}.name")
        typ = str(dm.get("type", "string")).lower()
        if typ not in DIMENSION_TYPES:
            raise SpecError(
                f"{dp}.type", f"unknown dimension type {dm.get('type')!r}; expected one of {', '.join(DIMENSION_TYPES)}"
            )
        if typ == "auto":
            typ = _auto_type(dm.get("castToType"), f"{dp}.castToType")
        mvh = dm.get("multiValueHandling")
        if mvh is not None:
            mvh = str(mvh).upper()
            if typ != "string" or mvh not in MULTI_VALUE_HANDLING:
                raise SpecError(f"{dp}.multiValueHandling",
                                f"{dm.get('multiValueHandling')!r}: a string dimension's multiValueHandling is one of "
                                f"{', '.join(MULTI_VALUE_HANDLING)}")
        dims.append(DimensionSchema(name, typ, mvh))
    excl = [
        _name(x, f"{p}.dimensionExclusions[{i}]")
        for i, x in enumerate(_list(m.get("dimensionExclusions"), f"{p}.dimensionExclusions"))
    ]
    return dims, excl


def _auto_type(raw: Any, p: str) -> str:
    """The stored type of an ``auto`` dimension from its ``castToType``. Druid infers the type from the
    data when there is none; radstack needs it declared (types must agree between segments written by
    the streaming job and by the batch rebuild, which see different rows)."""
    key = str(raw or "").replace(" ", "").upper()
    if key in ARRAY_TYPES:
        return ARRAY_TYPES[key]
    if key in _AUTO_SCALARS:
        return _AUTO_SCALARS[key]
    choices = ", ".join([*ARRAY_TYPES, *_AUTO_SCALARS])
    if raw is None:
        raise SpecError(p, f"an auto dimension needs castToType here (one of {choices}); use type json for "
                           "nested data")
    raise SpecError(p, f"{raw!r}: castToType is one of {choices}")


def _parse_metrics(raw: Any, p: str) -> list[MetricSpec]:
    out: list[MetricSpec] = []
    for i, mraw in enumerate(_list(raw, p)):
        mp = f"{p}[{i}]"
        m = _mapping(mraw, mp, allow_none=False)
        typ_raw = m.get("type")
        if not isinstance(typ_raw, str) or typ_raw.lower() not in _METRIC_TYPES_LOWER:
            raise SpecError(
                f"{mp}.type", f"unknown metric type {typ_raw!r}; expected one of {', '.join(METRIC_TYPES)}"
            )
        typ = _METRIC_TYPES_LOWER[typ_raw.lower()]
        name = _name(m.get("name"), f"{mp}.name")
        field_name = m.get("fieldName")
        expression = m.get("expression")
        if field_name is not None:
            field_name = _name(field_name, f"{mp}.fieldName")
        if expression is not None:
            expression = _name(expression, f"{mp}.expression")
        if typ != "count":
            if field_name is None and expression is None:
                raise SpecError(mp, f"{typ} {name!r} needs 'fieldName' or 'expression'")
            if field_name is not None and expression is not None:
                raise SpecError(mp, f"{typ} {name!r}: give only one of 'fieldName' and 'expression'")
            if expression is not None:
                _validate_expression(expression, f"{mp}.expression")
        sketch = None
        if typ in SKETCH_METRICS:
            if expression is not None:
                raise SpecError(f"{mp}.expression", f"{typ} reads a field ('fieldName'), not an expression")
            try:
                sketch = parse_params(typ, m)
            except SketchParamError as e:
                raise SpecError(f"{mp}.{e.field}", e.message) from e
        out.append(MetricSpec(typ, name, field_name, expression, sketch))
    return out


def _parse_granularity_spec(raw: Any, p: str) -> GranularitySpec:
    m = _mapping(raw, p)
    typ = str(m.get("type", "uniform")).lower()
    if typ not in ("uniform", "arbitrary"):
        raise SpecError(f"{p}.type", f"unknown granularitySpec type {m.get('type')!r}")
    seg = _granularity(m.get("segmentGranularity"), f"{p}.segmentGranularity", "day")
    qry = _granularity(m.get("queryGranularity"), f"{p}.queryGranularity", "none")
    if seg.is_none:
        raise SpecError(f"{p}.segmentGranularity", "segmentGranularity cannot be NONE")
    if qry.is_all and not seg.is_all:
        raise SpecError(f"{p}.queryGranularity", "queryGranularity ALL needs segmentGranularity ALL")
    if seg.approx_millis() < qry.approx_millis():
        raise SpecError(
            f"{p}.queryGranularity",
            f"queryGranularity {m.get('queryGranularity')!r} is coarser than segmentGranularity "
            f"{m.get('segmentGranularity', 'DAY')!r}",
        )
    rollup = _bool(m.get("rollup", True), f"{p}.rollup")
    intervals: list[Interval] = []
    for i, iv in enumerate(_list(m.get("intervals"), f"{p}.intervals")):
        ip = f"{p}.intervals[{i}]"
        if not isinstance(iv, str):
            raise SpecError(ip, f"expected an ISO interval string, got {iv!r}")
        try:
            interval = Interval.parse(iv)
        except TimeParseError as e:
            raise SpecError(ip, str(e)) from e
        if interval.start == interval.end:
            raise SpecError(ip, f"interval {iv!r} is empty")
        intervals.append(interval)
    return GranularitySpec(seg, qry, rollup, tuple(intervals))


def _parse_transform_spec(raw: Any, p: str) -> tuple[list[Transform], dict[str, Any] | None]:
    m = _mapping(raw, p)
    out: list[Transform] = []
    names: set[str] = set()
    for i, t in enumerate(_list(m.get("transforms"), f"{p}.transforms")):
        tp = f"{p}.transforms[{i}]"
        tm = _mapping(t, tp, allow_none=False)
        typ = tm.get("type", "expression")
        if typ != "expression":
            raise SpecError(f"{tp}.type", f"unknown transform type {typ!r}; expected 'expression'")
        name = _name(tm.get("name"), f"{tp}.name")
        if name in names:
            raise SpecError(f"{tp}.name", f"duplicate transform {name!r}")
        names.add(name)
        expr = _name(tm.get("expression"), f"{tp}.expression")
        _validate_expression(expr, f"{tp}.expression")
        out.append(Transform(name, expr))
    flt = m.get("filter")
    if flt is not None:
        fm = _mapping(flt, f"{p}.filter", allow_none=False)
        if "type" not in fm:
            raise SpecError(f"{p}.filter.type", "missing")
        _validate_filter(dict(fm), f"{p}.filter")
        flt = dict(fm)
    return out, flt


def _validate_expression(expr: str, path: str) -> None:
    try:
        expression_to_sql(expr)
    except Exception as e:  # the translator's own error type names what is wrong
        raise SpecError(path, f"invalid expression {expr!r}: {e}") from e


def _validate_filter(flt: dict[str, Any], path: str) -> None:
    try:
        filter_to_sql(flt)
    except Exception as e:
        raise SpecError(path, f"invalid filter: {e}") from e


# ---- processing --------------------------------------------------------------------------------

_PROCESSING_KEYS = {
    "topics", "topic", "eventId", "event_id", "windowPeriod", "window_period", "joins", "lookups",
    "deadLetterTopic", "dead_letter_topic", "processedTopic", "processed_topic",
}  # fmt: skip


def parse_processing(raw: Any, p: str = "processing") -> ProcessingSpec:
    m = _mapping(raw, p)
    topics_raw = _get(m, "topics")
    if topics_raw is None and "topic" in m:
        topics_raw = [m["topic"]]
    if isinstance(topics_raw, str):
        topics_raw = [topics_raw]
    topics = tuple(_name(t, f"{p}.topics[{i}]") for i, t in enumerate(_list(topics_raw, f"{p}.topics")))
    event_id = _get(m, "eventId", "event_id")
    if event_id is not None:
        event_id = _name(event_id, f"{p}.eventId")
    wp_raw = _get(m, "windowPeriod", "window_period", default="PT10M")
    try:
        window = Period.parse(_name(wp_raw, f"{p}.windowPeriod"))
    except TimeParseError as e:
        raise SpecError(f"{p}.windowPeriod", str(e)) from e
    joins = []
    for i, j in enumerate(_list(m.get("joins"), f"{p}.joins")):
        jp = f"{p}.joins[{i}]"
        jm = _mapping(j, jp, allow_none=False)
        name = _name(jm.get("name", f"join{i}"), f"{jp}.name")
        typ = _name(jm.get("type", "lookup"), f"{jp}.type")
        joins.append(JoinSpec(name, typ, {k: v for k, v in jm.items() if k not in ("name", "type")}))
    lookups_raw = m.get("lookups")
    if isinstance(lookups_raw, Mapping):  # {name: {...}} form
        lookups_raw = [{"name": k, **_mapping(v, f"{p}.lookups.{k}", allow_none=False)} for k, v in lookups_raw.items()]
    lookups = []
    for i, lk in enumerate(_list(lookups_raw, f"{p}.lookups")):
        lp = f"{p}.lookups[{i}]"
        lm = _mapping(lk, lp, allow_none=False)
        name = _name(lm.get("name"), f"{lp}.name")
        typ = _name(lm.get("type", "map"), f"{lp}.type")
        lookups.append(LookupSpec(name, typ, {k: v for k, v in lm.items() if k not in ("name", "type")}))
    dlt = _get(m, "deadLetterTopic", "dead_letter_topic")
    if dlt is not None:
        dlt = _name(dlt, f"{p}.deadLetterTopic")
    processed = _get(m, "processedTopic", "processed_topic")
    if processed is not None:
        processed = _name(processed, f"{p}.processedTopic")
    extra = {k: v for k, v in m.items() if k not in _PROCESSING_KEYS}
    return ProcessingSpec(
        topics=topics,
        event_id=event_id,
        window_period=window,
        joins=tuple(joins),
        lookups=tuple(lookups),
        dead_letter_topic=dlt,
        processed_topic=processed,
        extra=extra,
    )


# ---- files -----------------------------------------------------------------------------------


def _read_file(path: Path) -> Mapping[str, Any]:
    try:
        text = path.read_text()
    except OSError as e:
        raise SpecError("", f"cannot read datasource spec {path}: {e}") from e
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        raise SpecError("", f"{path}: not valid {'JSON' if path.suffix.lower() == '.json' else 'YAML'}: {e}") from e
    if not isinstance(data, Mapping):
        raise SpecError("", f"{path}: the top level must be an object")
    return data


def load_datasource_spec(spec: str | os.PathLike[str] | Mapping[str, Any]) -> DatasourceSpec:
    """Read a datasource spec from a YAML/JSON file or a mapping, in any accepted shape."""
    source: Path | None = None
    if isinstance(spec, str | os.PathLike):
        source = Path(spec)
        data = _read_file(source)
    else:
        data = _mapping(spec, "", allow_none=False)
    if "processing" in data and "dataSchema" not in data:
        raise SpecError("dataSchema", "missing")
    if "dataSchema" in data and "spec" not in data:
        unknown = sorted(set(data) - {"dataSchema", "processing", "type"})
        if unknown:
            raise SpecError(unknown[0], "unknown top-level key (expected dataSchema, processing)")
    schema = parse_data_schema(data)
    processing = parse_processing(data.get("processing"))
    return DatasourceSpec(schema, processing, source)
