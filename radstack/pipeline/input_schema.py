"""Which raw fields a datasource spec reads and how they are typed: the JSON schema the parse stage
asks Spark for, and the Kafka source's columns.

Every field is parsed as a STRING first (Spark renders a JSON number as its text when the schema says
string), so a value of the wrong type is *detected* by the validation step instead of silently
becoming null; ``field_types`` says what each field must convert to.
"""

from __future__ import annotations

from typing import Any

from radstack.expressions import required_columns
from radstack.filters import filter_columns
from radstack.spec import TIME_COLUMN, DatasourceSpec

__all__ = [
    "KAFKA_COLUMNS",
    "CORRUPT_COLUMN",
    "input_fields",
    "field_types",
    "json_schema_ddl",
    "join_options",
]

#: the columns of Spark's Kafka source
KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")
CORRUPT_COLUMN = "_corrupt_record"

def join_options(spec: DatasourceSpec) -> list[dict[str, Any]]:
    """The stream joins of a spec (``processing.joins`` entries with ``type: stream``), as dicts."""
    out = []
    for j in spec.processing.joins:
        if j.type != "stream":
            continue
        d = {str(k): v for k, v in j.options.items() if k is not True}
        on = j.options.get("on", j.options.get(True, j.options.get("key")))  # YAML 1.1 reads a bare `on:` as true
        if on is None:
            raise ValueError(f"processing.joins {j.name!r}: 'on' (the join key) is required")
        out.append(dict(d, name=j.name, type=j.type, on=str(on)))
    return out


def input_fields(spec: DatasourceSpec) -> list[str]:
    """Raw fields the pipeline reads, in a stable order: timestamp, event id, dimensions, metric
    inputs, then what transforms, the filter, lookups and enrichment read."""

    ds = spec.data_schema
    if ds.is_schemaless:
        raise ValueError(
            f"datasource {spec.name!r}: the streaming/batch pipeline needs declared dimensions "
            "(dimensionsSpec.dimensions is empty)"
        )
    out: list[str] = [ds.timestamp_spec.column]
    if spec.processing.event_id:
        out.append(spec.processing.event_id)
    out += [d.name for d in ds.dimensions]
    for m in ds.metrics:
        if m.field_name:
            out.append(m.field_name)
        if m.expression:
            out += sorted(required_columns(m.expression))
    for t in ds.transforms:
        out += sorted(required_columns(t.expression))
    if ds.transform_filter is not None:
        out += sorted(filter_columns(ds.transform_filter))
    for item in list(spec.processing.extra.get("enrich", []) or []):
        if isinstance(item, dict) and item.get("field"):
            out.append(str(item["field"]))
    for j in join_options(spec):
        if j.get("on"):
            out.append(str(j["on"]))
    out += [str(f) for f in spec.processing.extra.get("required", []) or []]
    produced = {t.name for t in ds.transforms} | {TIME_COLUMN} | _enrich_outputs(spec) | _join_outputs(spec)
    seen: dict[str, None] = {}
    for f in out:
        if f not in produced or f == ds.timestamp_spec.column:
            seen.setdefault(f, None)
    for f in out:  # a transform may overwrite an input column of the same name: still read it
        if f in {t.name for t in ds.transforms}:
            seen.setdefault(f, None)
    return list(seen)


def _enrich_outputs(spec: DatasourceSpec) -> set[str]:
    out: set[str] = set()
    for item in list(spec.processing.extra.get("enrich", []) or []):
        if isinstance(item, dict):
            out.update(str(v) for k, v in item.items() if k in ("output", "as") and v)
    return out


def _join_outputs(spec: DatasourceSpec) -> set[str]:
    return {str(j.get("flag", "is_clicked")) for j in join_options(spec)}


def field_types(spec: DatasourceSpec) -> dict[str, str]:
    """Field → Druid type it must convert to (``string`` when the spec does not say)."""
    ds = spec.data_schema
    types = {f: "string" for f in input_fields(spec)}
    for d in ds.dimensions:
        if d.name in types:
            types[d.name] = "string" if d.is_array else d.type  # an array keeps its JSON text until rollup
    for m in ds.metrics:
        if m.field_name and m.field_name in types and m.field_name not in ds.dimension_names and m.sketch is None:
            types[m.field_name] = m.value_type  # a sketch reads its field's text (or number) as it is
    types[ds.timestamp_spec.column] = "string"
    return types


def json_schema_ddl(fields: list[str]) -> str:
    """A Spark DDL struct of STRING fields plus the corrupt-record column."""
    cols = [f"`{f.replace('`', '``')}` STRING" for f in fields]
    cols.append(f"`{CORRUPT_COLUMN}` STRING")
    return ", ".join(cols)
