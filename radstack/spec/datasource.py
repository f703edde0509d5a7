"""radstack's ``processing`` section and the datasource spec file (YAML or JSON) that holds both."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from radstack.spec.data_schema import parse_data_schema
from radstack.spec.fields import as_list, as_mapping, as_name, get_key
from radstack.spec.model import DatasourceSpec, JoinSpec, LookupSpec, ProcessingSpec, SpecError
from radstack.time.intervals import Period, TimeParseError

_PROCESSING_KEYS = {
    "topics", "topic", "eventId", "event_id", "windowPeriod", "window_period", "joins", "lookups",
    "deadLetterTopic", "dead_letter_topic", "processedTopic", "processed_topic",
}  # fmt: skip


def parse_processing(raw: Any, p: str = "processing") -> ProcessingSpec:
    m = as_mapping(raw, p)
    topics_raw = get_key(m, "topics")
    if topics_raw is None and "topic" in m:
        topics_raw = [m["topic"]]
    if isinstance(topics_raw, str):
        topics_raw = [topics_raw]
    topics = tuple(as_name(t, f"{p}.topics[{i}]") for i, t in enumerate(as_list(topics_raw, f"{p}.topics")))
    event_id = get_key(m, "eventId", "event_id")
    if event_id is not None:
        event_id = as_name(event_id, f"{p}.eventId")
    wp_raw = get_key(m, "windowPeriod", "window_period", default="PT10M")
    try:
        window = Period.parse(as_name(wp_raw, f"{p}.windowPeriod"))
    except TimeParseError as e:
        raise SpecError(f"{p}.windowPeriod", str(e)) from e
    joins = []
    for i, j in enumerate(as_list(m.get("joins"), f"{p}.joins")):
        jp = f"{p}.joins[{i}]"
        jm = as_mapping(j, jp, allow_none=False)
        name = as_name(jm.get("name", f"join{i}"), f"{jp}.name")
        typ = as_name(jm.get("type", "lookup"), f"{jp}.type")
        joins.append(JoinSpec(name, typ, {k: v for k, v in jm.items() if k not in ("name", "type")}))
    lookups_raw = m.get("lookups")
    if isinstance(lookups_raw, Mapping):  # {name: {...}} form
        lookups_raw = [
            {"name": k, **as_mapping(v, f"{p}.lookups.{k}", allow_none=False)} for k, v in lookups_raw.items()
        ]
    lookups = []
    for i, lk in enumerate(as_list(lookups_raw, f"{p}.lookups")):
        lp = f"{p}.lookups[{i}]"
        lm = as_mapping(lk, lp, allow_none=False)
        name = as_name(lm.get("name"), f"{lp}.name")
        typ = as_name(lm.get("type", "map"), f"{lp}.type")
        lookups.append(LookupSpec(name, typ, {k: v for k, v in lm.items() if k not in ("name", "type")}))
    dlt = get_key(m, "deadLetterTopic", "dead_letter_topic")
    if dlt is not None:
        dlt = as_name(dlt, f"{p}.deadLetterTopic")
    processed = get_key(m, "processedTopic", "processed_topic")
    if processed is not None:
        processed = as_name(processed, f"{p}.processedTopic")
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
        raise SpecError(
            "", f"{path}: not valid {'JSON' if path.suffix.lower() == '.json' else 'YAML'}: {e}"
        ) from e
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
        data = as_mapping(spec, "", allow_none=False)
    if "processing" in data and "dataSchema" not in data:
        raise SpecError("dataSchema", "missing")
    if "dataSchema" in data and "spec" not in data:
        unknown = sorted(set(data) - {"dataSchema", "processing", "type"})
        if unknown:
            raise SpecError(unknown[0], "unknown top-level key (expected dataSchema, processing)")
    schema = parse_data_schema(data)
    if schema.needs_discovery:
        raise SpecError(
            "dataSchema.dimensionsSpec",
            "a datasource spec declares every dimension's type (an auto dimension needs castToType, "
            "useSchemaDiscovery is for native batch tasks): the streaming job and the batch rebuild see "
            "different rows and must write the same types",
        )
    processing = parse_processing(data.get("processing"))
    return DatasourceSpec(schema, processing, source)
