"""Parse and validate a submitted native batch task (``index_parallel`` / ``index``).

Accepted shapes: Druid's ``{"type", "id"?, "spec": {"dataSchema", "ioConfig", "tuningConfig"},
"context"?}`` and the old top-level layout ``{"type", "dataSchema", "ioConfig", "tuningConfig"}``.
Every problem raises :class:`TaskSpecError` whose message starts with the bad field's path; the API
turns it into a 400 Druid error.
"""

from __future__ import annotations

import random
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from radstack.spec import DataSchema, SpecError, parse_data_schema
from radstack.storage.ingest_stats import INT_MAX
from radstack.time.intervals import format_instant
from serving.overlord.input_formats import validate_input_format
from serving.overlord.input_sources import InputSpecError, source_of, validate_input_source

#: Druid's partitionsSpec types (hashed, range and single_dim: see _check_secondary_partitions)
PARTITION_TYPES = ("dynamic", "hashed", "range", "single_dim")

TASK_TYPES = ("index_parallel", "index")
DEFAULT_MAX_ROWS_PER_SEGMENT = 5_000_000
DEFAULT_MAX_SAVED_PARSE_EXCEPTIONS = 100


class TaskSpecError(ValueError):
    """A task payload that cannot be run; the message starts with the field path."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


@dataclass(frozen=True)
class IndexTaskSpec:
    id: str
    type: str
    data_schema: DataSchema
    input_source: dict[str, Any]
    input_format: dict[str, Any]
    append_to_existing: bool
    max_rows_per_segment: int
    max_parse_exceptions: int
    max_saved_parse_exceptions: int
    payload: dict[str, Any]  # the normalized task JSON, as GET /task/{id} returns it

    @property
    def data_source(self) -> str:
        return self.data_schema.data_source


def new_task_id(task_type: str, data_source: str, now_ms: int) -> str:
    """Druid's id shape: ``index_parallel_<ds>_<8 random letters>_<ISO time>``."""
    rnd = "".join(random.choices(string.ascii_lowercase, k=8))
    return f"{task_type}_{data_source}_{rnd}_{format_instant(now_ms)}"


def _int(value: Any, path: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise TaskSpecError(path, f"expected an integer ≥ {minimum}, got {value!r}")
    return value


def parse_task(body: Any, now_ms: int) -> IndexTaskSpec:
    """Validate a task submission and return what the runner needs."""
    if not isinstance(body, Mapping):
        raise TaskSpecError("", "the task must be a JSON object")
    typ = body.get("type")
    if typ not in TASK_TYPES:
        raise TaskSpecError("type", f"unsupported task type {typ!r}; supported: {', '.join(TASK_TYPES)}")
    if "spec" in body:
        spec = body["spec"]
        if not isinstance(spec, Mapping):
            raise TaskSpecError("spec", "expected an object")
    else:  # old Druid: the spec fields at top level
        spec = {k: body[k] for k in ("dataSchema", "ioConfig", "tuningConfig") if k in body}
    if "dataSchema" not in spec:
        raise TaskSpecError("spec.dataSchema", "required")
    try:
        schema = parse_data_schema({"type": typ, "spec": {"dataSchema": spec["dataSchema"]}})
    except SpecError as e:
        raise TaskSpecError(e.path, e.reason) from e

    io_config = spec.get("ioConfig")
    if not isinstance(io_config, Mapping):
        raise TaskSpecError("spec.ioConfig", "required (an object with inputSource and inputFormat)")
    try:
        validate_input_source(io_config.get("inputSource"))
        fixed = source_of(io_config["inputSource"]).input_format
        if fixed is not None:
            io_config = {**io_config, "inputFormat": fixed}
        validate_input_format(io_config.get("inputFormat"))
    except InputSpecError as e:
        path, _, msg = str(e).partition(": ")
        raise TaskSpecError(path, msg) from e
    append = io_config.get("appendToExisting", False)
    if not isinstance(append, bool):
        raise TaskSpecError("spec.ioConfig.appendToExisting", f"expected true or false, got {append!r}")

    tuning = spec.get("tuningConfig") or {}
    if not isinstance(tuning, Mapping):
        raise TaskSpecError("spec.tuningConfig", "expected an object")
    partitions = tuning.get("partitionsSpec") or {}
    if not isinstance(partitions, Mapping):
        raise TaskSpecError("spec.tuningConfig.partitionsSpec", "expected an object")
    ptype = partitions.get("type", "dynamic")
    if ptype not in PARTITION_TYPES:
        raise TaskSpecError("spec.tuningConfig.partitionsSpec.type",
                            f"unknown partitionsSpec type {ptype!r}; expected one of {', '.join(PARTITION_TYPES)}")
    if ptype != "dynamic":
        _check_secondary_partitions(partitions, ptype, tuning, append)
    rows_key = next((k for k in ("maxRowsPerSegment", "targetRowsPerSegment") if partitions.get(k) is not None), None)
    if rows_key is not None:
        max_rows = _int(partitions[rows_key], f"spec.tuningConfig.partitionsSpec.{rows_key}", minimum=1)
    elif tuning.get("maxRowsPerSegment") is not None:
        max_rows = _int(tuning["maxRowsPerSegment"], "spec.tuningConfig.maxRowsPerSegment", minimum=1)
    else:
        max_rows = DEFAULT_MAX_ROWS_PER_SEGMENT
    max_parse = tuning.get("maxParseExceptions")
    max_parse = INT_MAX if max_parse is None else _int(max_parse, "spec.tuningConfig.maxParseExceptions", minimum=0)
    max_saved = tuning.get("maxSavedParseExceptions")
    max_saved = (DEFAULT_MAX_SAVED_PARSE_EXCEPTIONS if max_saved is None
                 else _int(max_saved, "spec.tuningConfig.maxSavedParseExceptions", minimum=0))

    context = body.get("context") or {}
    if not isinstance(context, Mapping):
        raise TaskSpecError("context", f"expected an object, got {context!r}")

    task_id = body.get("id")
    if task_id is not None and (not isinstance(task_id, str) or not task_id.strip() or "/" in task_id):
        raise TaskSpecError("id", f"invalid task id {task_id!r}")
    task_id = task_id or new_task_id(typ, schema.data_source, now_ms)

    payload = {
        "type": typ,
        "id": task_id,
        "groupId": body.get("groupId") or task_id,
        "resource": {"availabilityGroup": task_id, "requiredCapacity": 1},
        "spec": {"dataSchema": spec["dataSchema"], "ioConfig": dict(io_config), "tuningConfig": dict(tuning)},
        "context": dict(context),
        "dataSource": schema.data_source,
    }
    return IndexTaskSpec(
        id=task_id,
        type=typ,
        data_schema=schema,
        input_source=dict(io_config["inputSource"]),
        input_format=dict(io_config.get("inputFormat") or {}),
        append_to_existing=append,
        max_rows_per_segment=max_rows,
        max_parse_exceptions=max_parse,
        max_saved_parse_exceptions=max_saved,
        payload=payload,
    )


def _check_secondary_partitions(partitions: Mapping[str, Any], ptype: str, tuning: Mapping[str, Any],
                                append: bool) -> None:
    """Druid's checks of a ``hashed``/``range``/``single_dim`` partitionsSpec. radstack accepts them and
    writes each time chunk sorted by its dimensions, split by row count (``targetRowsPerSegment`` /
    ``maxRowsPerSegment``); it does not shard by hash or value range (answers are the same, segments
    are not pruned by dimension) — docs/ingestion.md says so."""
    p = "spec.tuningConfig.partitionsSpec"
    if tuning.get("forceGuaranteedRollup") is not True:
        raise TaskSpecError("spec.tuningConfig.forceGuaranteedRollup",
                            f"a {ptype} partitionsSpec needs forceGuaranteedRollup: true (perfect rollup)")
    if append:
        raise TaskSpecError("spec.ioConfig.appendToExisting",
                            "appendToExisting cannot be used with forceGuaranteedRollup")
    dims_key = "partitionDimension" if ptype == "single_dim" else "partitionDimensions"
    dims = partitions.get(dims_key)
    if ptype == "single_dim":
        if not isinstance(dims, str) or not dims:
            raise TaskSpecError(f"{p}.partitionDimension", "a single_dim partitionsSpec needs partitionDimension")
    elif dims is not None and (not isinstance(dims, list) or not all(isinstance(d, str) for d in dims)):
        raise TaskSpecError(f"{p}.{dims_key}", "expected a list of column names")
    if ptype == "range" and not dims:
        raise TaskSpecError(f"{p}.partitionDimensions", "a range partitionsSpec needs partitionDimensions")
    if ptype == "hashed" and partitions.get("numShards") is not None:
        _int(partitions["numShards"], f"{p}.numShards", minimum=1)
        if partitions.get("targetRowsPerSegment") is not None or partitions.get("maxRowsPerSegment") is not None:
            raise TaskSpecError(f"{p}.numShards", "numShards cannot be used with targetRowsPerSegment or maxRowsPerSegment")
