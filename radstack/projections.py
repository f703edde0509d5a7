"""Aggregate projections: pre-aggregated alternatives of a datasource's rows (Druid 33's ``projections``).

A projection groups a segment's rows by a subset of its dimensions and a coarser time granularity and
keeps some metrics re-aggregated (sum, min or max) plus the number of base rows it stands for
(``__rows``, which answers ``COUNT(*)``). It is declared in the ``dataSchema`` in Druid's shape::

    {"type": "aggregate", "name": "hourly_by_channel",
     "virtualColumns": [{"type": "expression", "name": "__gran",
                         "expression": "timestamp_floor(__time, 'PT1H')", "outputType": "LONG"}],
     "groupingColumns": [{"type": "long", "name": "__gran"}, {"type": "string", "name": "channel"}],
     "aggregators": [{"type": "longSum", "name": "added", "fieldName": "added"}]}

radstack builds a projection from the base segment's rows, so an aggregator's ``fieldName`` names a
**metric of the datasource** and at most one aggregator reads each metric. The time grouping is a
``timestamp_floor(__time, 'period')`` virtual column (UTC, no origin), ``__time`` itself (the
datasource's query granularity), or absent (the segment granularity).

This module holds the spec and the granularity arithmetic a broker needs to decide whether a query can
be answered from a projection; building and reading projection files is in
:mod:`radstack.storage.projection_files`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from radstack.time.floor import timestamp_floor_sql
from radstack.time.granularity import Granularity, GranularityError

__all__ = [
    "ROWS_COLUMN",
    "ProjectionAggregator",
    "ProjectionSpec",
    "ProjectionSpecError",
    "granularity_covers",
    "is_aligned_instant",
    "parse_projection",
    "projection_floor_sql",
]

ROWS_COLUMN = "__rows"
"""The column of every projection holding the number of base rows each projection row stands for."""

_DAY_MS = 86_400_000
_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_FLOOR_RE = re.compile(r"^\s*timestamp_floor\s*\(\s*__time\s*,\s*'([^']+)'\s*\)\s*$", re.IGNORECASE)
_AGG_RE = re.compile(r"^(long|double|float)(Sum|Min|Max)$")
_DATE_UNITS = {"years": "year", "months": "month", "weeks": "week", "days": "day"}


class ProjectionSpecError(ValueError):
    """An invalid projection: ``path`` in the spec and what is wrong."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


@dataclass(frozen=True)
class ProjectionAggregator:
    """One projection aggregator: ``kind`` (sum | min | max | count) over the metric ``field_name``."""

    type: str
    name: str
    kind: str
    field_name: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "name": self.name}
        if self.field_name is not None:
            out["fieldName"] = self.field_name
        return out


@dataclass(frozen=True)
class ProjectionSpec:
    name: str
    granularity: Granularity
    dimensions: tuple[str, ...]
    aggregators: tuple[ProjectionAggregator, ...]
    time_column: str | None = None  # the grouping column that carries time (``__gran``, ``__time``)
    time_expression: str | None = None  # its timestamp_floor expression, when a virtual column

    @property
    def metrics(self) -> dict[str, str]:
        """metric name → kind (sum | min | max) for the metrics this projection keeps."""
        return {a.field_name: a.kind for a in self.aggregators if a.field_name is not None}

    def to_json(self) -> dict[str, Any]:
        grouping: list[dict[str, Any]] = []
        out: dict[str, Any] = {"type": "aggregate", "name": self.name}
        if self.time_expression is not None and self.time_column is not None:
            out["virtualColumns"] = [{"type": "expression", "name": self.time_column,
                                      "expression": self.time_expression, "outputType": "LONG"}]
        if self.time_column is not None:
            grouping.append({"type": "long", "name": self.time_column})
        grouping += [{"type": "string", "name": d} for d in self.dimensions]
        out["groupingColumns"] = grouping
        out["aggregators"] = [a.to_json() for a in self.aggregators]
        return out


def parse_projection(
    raw: Any,
    path: str,
    *,
    dimensions: Sequence[str] | None,
    metrics: Mapping[str, str],
    segment_granularity: Granularity,
    query_granularity: Granularity,
) -> ProjectionSpec:
    """Parse one entry of ``dataSchema.projections``. ``dimensions`` is None for schemaless specs;
    ``metrics`` maps each metric name to its stored value type (long | double | float)."""
    if not isinstance(raw, Mapping):
        raise ProjectionSpecError(path, "a projection must be a JSON object")
    if raw.get("type", "aggregate") != "aggregate":
        raise ProjectionSpecError(f"{path}.type", f"unknown projection type {raw.get('type')!r}; expected 'aggregate'")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME_RE.match(name) or name.startswith("__"):
        raise ProjectionSpecError(f"{path}.name", f"invalid projection name {name!r} (letters, digits, '_', '.', '-')")
    floors: dict[str, tuple[str, Granularity]] = {}
    for i, vc in enumerate(_list(raw.get("virtualColumns"), f"{path}.virtualColumns")):
        vp = f"{path}.virtualColumns[{i}]"
        expr = vc.get("expression") if isinstance(vc, Mapping) else None
        m = _FLOOR_RE.match(expr) if isinstance(expr, str) and vc.get("type", "expression") == "expression" else None
        if m is None or not isinstance(vc.get("name"), str):
            raise ProjectionSpecError(vp, "only expression virtual columns timestamp_floor(__time, '<period>') are "
                                          "supported in projections")
        gran = _floor_granularity(m.group(1), vp)
        floors[vc["name"]] = (expr, gran)
    time_column: str | None = None
    time_expression: str | None = None
    gran = segment_granularity
    dims: list[str] = []
    for i, gc in enumerate(_list(raw.get("groupingColumns"), f"{path}.groupingColumns")):
        gp = f"{path}.groupingColumns[{i}]"
        col = gc if isinstance(gc, str) else (gc.get("name") if isinstance(gc, Mapping) else None)
        if not isinstance(col, str) or not col:
            raise ProjectionSpecError(gp, "a grouping column needs a name")
        if col in floors or col == "__time":
            if time_column is not None:
                raise ProjectionSpecError(gp, "a projection can group by only one time column")
            time_column = col
            if col in floors:
                time_expression, gran = floors[col]
            else:
                gran = query_granularity
            continue
        if dimensions is not None and col not in dimensions:
            raise ProjectionSpecError(gp, f"{col!r} is not a dimension of the datasource")
        if col in dims:
            raise ProjectionSpecError(gp, f"{col!r} is listed twice")
        dims.append(col)
    if time_column is None and projection_floor_sql(gran, '"__time"') is None:
        raise ProjectionSpecError(path, "a projection without a time grouping column needs a segmentGranularity of "
                                        "whole UTC hours, days, weeks, months or years")
    aggs: list[ProjectionAggregator] = []
    seen: set[str] = set()
    for i, a in enumerate(_list(raw.get("aggregators"), f"{path}.aggregators")):
        aggs.append(_aggregator(a, f"{path}.aggregators[{i}]", metrics, seen))
    return ProjectionSpec(name, gran, tuple(dims), tuple(aggs), time_column, time_expression)


def _list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ProjectionSpecError(path, "expected a list")
    return value


def _floor_granularity(period: str, path: str) -> Granularity:
    try:
        gran = Granularity.parse({"type": "period", "period": period})
    except GranularityError as e:
        raise ProjectionSpecError(path, str(e)) from e
    if projection_floor_sql(gran, '"__time"') is None:
        raise ProjectionSpecError(path, f"period {period!r}: a projection's time floor must be whole hours, minutes "
                                        "or seconds dividing a day, or one day, week, month, quarter or year")
    return gran


def _aggregator(raw: Any, path: str, metrics: Mapping[str, str], seen: set[str]) -> ProjectionAggregator:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("type"), str) or not isinstance(raw.get("name"), str):
        raise ProjectionSpecError(path, "an aggregator needs a 'type' and a 'name'")
    typ, name = raw["type"], raw["name"]
    if typ == "count":
        return ProjectionAggregator(typ, name, "count")
    m = _AGG_RE.match(typ)
    if m is None:
        raise ProjectionSpecError(f"{path}.type", f"aggregator type {typ!r} is not supported in projections "
                                                  "(longSum/doubleSum, *Min, *Max and count are)")
    value_type, kind = m.group(1), m.group(2).lower()
    if value_type == "float" and kind == "sum":
        raise ProjectionSpecError(f"{path}.type", "floatSum loses precision when re-aggregated; use doubleSum on a "
                                                  "double metric")
    field = raw.get("fieldName")
    if raw.get("expression") is not None or not isinstance(field, str):
        raise ProjectionSpecError(path, "a projection aggregator reads one metric through 'fieldName'")
    if field not in metrics:
        raise ProjectionSpecError(f"{path}.fieldName", f"{field!r} is not a metric of the datasource")
    if metrics[field] != value_type:
        raise ProjectionSpecError(f"{path}.type", f"{typ} does not match metric {field!r} of type {metrics[field]}")
    if field in seen:
        raise ProjectionSpecError(f"{path}.fieldName", f"metric {field!r} already has an aggregator in this projection")
    seen.add(field)
    return ProjectionAggregator(typ, name, kind, field)


# ---- granularity arithmetic ------------------------------------------------------------------------


def _boundaries(g: Granularity) -> tuple[str, int] | None:
    """How ``g``'s bucket boundaries are laid out: ``("step", ms)`` — every multiple of ms from the
    epoch; ``("midnight", 0)`` — UTC midnights (some of them); None when zoned, with an origin, or
    mixing date and time fields."""
    if g.kind == "duration":
        return ("step", int(g.duration or 0)) if not g.origin and g.duration else None
    if g.kind != "period" or g.period is None or g.time_zone != "UTC" or g.origin is not None:
        return None
    p = g.period
    has_date = bool(p.years or p.months or p.weeks or p.days)
    has_time = bool(p.hours or p.minutes or p.millis)
    if has_time and not has_date:
        return ("step", p.fixed_millis)
    if has_date and not has_time:
        return ("midnight", 0)
    return None


def granularity_covers(coarse: Granularity, fine: Granularity) -> bool:
    """True when every bucket boundary of ``coarse`` is a boundary of ``fine``, so flooring to
    ``fine`` first and then to ``coarse`` equals flooring to ``coarse``."""
    if fine.is_none or coarse.is_all or coarse == fine:
        return True
    if fine.is_all or coarse.is_none:
        return False
    bf, bc = _boundaries(fine), _boundaries(coarse)
    if bf is None or bc is None:
        return False
    if bf[0] == "step":
        step = bf[1]
        return bc[1] % step == 0 if bc[0] == "step" else _DAY_MS % step == 0
    # fine is midnight-based: only one whole UTC day is a boundary every midnight
    assert fine.period is not None
    if fine.period != type(fine.period)(days=1):
        return False
    return bc[0] == "midnight" or bc[1] % _DAY_MS == 0


def is_aligned_instant(ms: int, gran: Granularity) -> bool:
    """True when ``ms`` is a bucket boundary of ``gran``."""
    if gran.is_none:
        return True
    if gran.is_all:
        return False
    return gran.bucket_start(ms) == ms


def projection_floor_sql(gran: Granularity, col: str) -> str | None:
    """DuckDB SQL flooring the TIMESTAMP ``col`` to ``gran`` (rendered by :mod:`radstack.time.floor`) when
    a projection may use that granularity: UTC buckets that whole days divide or that start at UTC
    midnights with one calendar field; None for others."""
    if gran.is_none:
        return col
    b = _boundaries(gran)
    if b is None:
        return None
    if b[0] == "step":
        if b[1] <= 0 or _DAY_MS % b[1]:
            return None
    else:
        assert gran.period is not None
        fields = [getattr(gran.period, k) for k in _DATE_UNITS if getattr(gran.period, k)]
        if len(fields) != 1 or fields[0] not in (1, 3):
            return None
        if fields[0] == 3 and not gran.period.months:
            return None
    return timestamp_floor_sql(gran, col)
