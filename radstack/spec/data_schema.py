"""Parsing Druid's ``dataSchema`` (timestampSpec, dimensions, metrics, granularity, transforms, projections)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from radstack.expressions import expression_to_sql
from radstack.filters import filter_to_sql
from radstack.projections import ProjectionSpec, ProjectionSpecError, parse_projection
from radstack.sketches import SKETCH_METRICS, SketchParamError, parse_params
from radstack.spec.fields import (
    as_bool,
    as_list,
    as_mapping,
    as_name,
    check_data_source,
    get_key,
    parse_granularity_field,
    parse_instant_field,
)
from radstack.spec.model import (
    ARRAY_TYPES,
    AUTO_SCALARS,
    DIMENSION_TYPES,
    METRIC_TYPES,
    METRIC_TYPES_LOWER,
    MULTI_VALUE_HANDLING,
    TIME_COLUMN,
    TIMESTAMP_FORMATS,
    DataSchema,
    DimensionSchema,
    GranularitySpec,
    MetricSpec,
    SpecError,
    TimestampSpec,
    Transform,
)
from radstack.time.intervals import Interval, TimeParseError
from radstack.time.joda import tokenize


def _unwrap_data_schema(mapping: Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
    """Find the ``dataSchema`` object in any accepted shape; returns it and its path."""
    if "spec" in mapping and isinstance(mapping["spec"], Mapping) and "dataSchema" in mapping["spec"]:
        return as_mapping(
            mapping["spec"]["dataSchema"], "spec.dataSchema", allow_none=False
        ), "spec.dataSchema"
    if "dataSchema" in mapping:
        return as_mapping(mapping["dataSchema"], "dataSchema", allow_none=False), "dataSchema"
    if "type" in mapping and "spec" in mapping:
        raise SpecError("spec.dataSchema", "missing")
    return mapping, "dataSchema"


def parse_data_schema(mapping: Mapping[str, Any]) -> DataSchema:
    """Parse a bare ``dataSchema``, an ingestion spec (``{"type","spec":{"dataSchema"…}}``) or a
    radstack datasource spec (``{"dataSchema", "processing"}``) into a :class:`DataSchema`."""
    if isinstance(mapping, DataSchema):
        return mapping
    root = as_mapping(mapping, "", allow_none=False)
    ds, p = _unwrap_data_schema(root)

    data_source = check_data_source(get_key(ds, "dataSource"), f"{p}.dataSource")

    # Druid's legacy layout keeps timestampSpec/dimensionsSpec under parser.parseSpec.
    parse_spec = as_mapping(
        as_mapping(ds.get("parser"), f"{p}.parser").get("parseSpec"), f"{p}.parser.parseSpec"
    )
    ts_raw = ds.get("timestampSpec", parse_spec.get("timestampSpec"))
    dims_raw = ds.get("dimensionsSpec", parse_spec.get("dimensionsSpec"))

    timestamp_spec = _parse_timestamp_spec(ts_raw, f"{p}.timestampSpec")
    metrics = _parse_metrics(ds.get("metricsSpec"), f"{p}.metricsSpec")
    dimensions, exclusions = _parse_dimensions(dims_raw, f"{p}.dimensionsSpec")
    discovery = as_mapping(dims_raw, f"{p}.dimensionsSpec").get("useSchemaDiscovery") is True
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
        schema_discovery=discovery,
    )


def _parse_projections(
    raw: Any,
    p: str,
    dimensions: Sequence[DimensionSchema],
    metrics: Sequence[MetricSpec],
    gran: GranularitySpec,
) -> tuple[ProjectionSpec, ...]:
    out: list[ProjectionSpec] = []
    value_types = {m.name: m.value_type for m in metrics}
    for i, raw_projection in enumerate(as_list(raw, p)):
        try:
            pr = parse_projection(
                raw_projection,
                f"{p}[{i}]",
                dimensions=[d.name for d in dimensions] or None,
                metrics=value_types,
                segment_granularity=gran.segment_granularity,
                query_granularity=gran.query_granularity,
            )
        except ProjectionSpecError as e:
            raise SpecError(e.path, e.message) from e
        if any(o.name == pr.name for o in out):
            raise SpecError(f"{p}[{i}].name", f"duplicate projection name {pr.name!r}")
        multi = [d.name for d in dimensions if d.multi_value_handling and d.name in pr.dimensions]
        if multi:
            raise SpecError(
                f"{p}[{i}].groupingColumns",
                f"{', '.join(multi)}: a projection cannot group by a multi-value dimension",
            )
        out.append(pr)
    return tuple(out)


def _parse_timestamp_spec(raw: Any, p: str) -> TimestampSpec:
    m = as_mapping(raw, p)
    column = m.get("column", "timestamp")
    column = as_name(column, f"{p}.column")
    fmt = m.get("format", "auto")
    fmt = as_name(fmt, f"{p}.format")
    if fmt.lower() in TIMESTAMP_FORMATS:
        fmt = fmt.lower()
    else:
        _validate_joda(fmt, f"{p}.format")
    missing = m.get("missingValue")
    missing_ms = None if missing is None else parse_instant_field(missing, f"{p}.missingValue")
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
    m = as_mapping(raw, p)
    dims: list[DimensionSchema] = []
    for i, d in enumerate(as_list(m.get("dimensions"), f"{p}.dimensions")):
        dp = f"{p}.dimensions[{i}]"
        if isinstance(d, str):
            dims.append(DimensionSchema(as_name(d, dp)))
            continue
        dm = as_mapping(d, dp, allow_none=False)
        name = as_name(dm.get("name"), f"{dp}.name")
        typ = str(dm.get("type", "string")).lower()
        if typ not in DIMENSION_TYPES:
            raise SpecError(
                f"{dp}.type",
                f"unknown dimension type {dm.get('type')!r}; expected one of {', '.join(DIMENSION_TYPES)}",
            )
        if typ == "auto":
            typ = _auto_type(dm.get("castToType"), f"{dp}.castToType")
        mvh = dm.get("multiValueHandling")
        if mvh is not None:
            mvh = str(mvh).upper()
            if typ != "string" or mvh not in MULTI_VALUE_HANDLING:
                raise SpecError(
                    f"{dp}.multiValueHandling",
                    f"{dm.get('multiValueHandling')!r}: a string dimension's multiValueHandling is one of "
                    f"{', '.join(MULTI_VALUE_HANDLING)}",
                )
        dims.append(DimensionSchema(name, typ, mvh))
    excl = [
        as_name(x, f"{p}.dimensionExclusions[{i}]")
        for i, x in enumerate(as_list(m.get("dimensionExclusions"), f"{p}.dimensionExclusions"))
    ]
    return dims, excl


def _auto_type(raw: Any, p: str) -> str:
    """The stored type of an ``auto`` dimension from its ``castToType``; without one, ``auto``: the type
    is discovered from the rows, as Druid does (native batch tasks only: a datasource spec, whose
    segments come from the streaming job and the batch rebuild that see different rows, must declare
    it, see :func:`radstack.spec.datasource.load_datasource_spec`)."""
    if raw is None:
        return "auto"
    key = str(raw or "").replace(" ", "").upper()
    if key in ARRAY_TYPES:
        return ARRAY_TYPES[key]
    if key in AUTO_SCALARS:
        return AUTO_SCALARS[key]
    choices = ", ".join([*ARRAY_TYPES, *AUTO_SCALARS])
    raise SpecError(p, f"{raw!r}: castToType is one of {choices}")


def _parse_metrics(raw: Any, p: str) -> list[MetricSpec]:
    out: list[MetricSpec] = []
    for i, mraw in enumerate(as_list(raw, p)):
        mp = f"{p}[{i}]"
        m = as_mapping(mraw, mp, allow_none=False)
        typ_raw = m.get("type")
        if not isinstance(typ_raw, str) or typ_raw.lower() not in METRIC_TYPES_LOWER:
            raise SpecError(
                f"{mp}.type", f"unknown metric type {typ_raw!r}; expected one of {', '.join(METRIC_TYPES)}"
            )
        typ = METRIC_TYPES_LOWER[typ_raw.lower()]
        name = as_name(m.get("name"), f"{mp}.name")
        field_name = m.get("fieldName")
        expression = m.get("expression")
        if field_name is not None:
            field_name = as_name(field_name, f"{mp}.fieldName")
        if expression is not None:
            expression = as_name(expression, f"{mp}.expression")
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
    m = as_mapping(raw, p)
    typ = str(m.get("type", "uniform")).lower()
    if typ not in ("uniform", "arbitrary"):
        raise SpecError(f"{p}.type", f"unknown granularitySpec type {m.get('type')!r}")
    seg = parse_granularity_field(m.get("segmentGranularity"), f"{p}.segmentGranularity", "day")
    qry = parse_granularity_field(m.get("queryGranularity"), f"{p}.queryGranularity", "none")
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
    rollup = as_bool(m.get("rollup", True), f"{p}.rollup")
    intervals: list[Interval] = []
    for i, iv in enumerate(as_list(m.get("intervals"), f"{p}.intervals")):
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
    m = as_mapping(raw, p)
    out: list[Transform] = []
    names: set[str] = set()
    for i, t in enumerate(as_list(m.get("transforms"), f"{p}.transforms")):
        tp = f"{p}.transforms[{i}]"
        tm = as_mapping(t, tp, allow_none=False)
        typ = tm.get("type", "expression")
        if typ != "expression":
            raise SpecError(f"{tp}.type", f"unknown transform type {typ!r}; expected 'expression'")
        name = as_name(tm.get("name"), f"{tp}.name")
        if name in names:
            raise SpecError(f"{tp}.name", f"duplicate transform {name!r}")
        names.add(name)
        expr = as_name(tm.get("expression"), f"{tp}.expression")
        _validate_expression(expr, f"{tp}.expression")
        out.append(Transform(name, expr))
    flt = m.get("filter")
    if flt is not None:
        fm = as_mapping(flt, f"{p}.filter", allow_none=False)
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
