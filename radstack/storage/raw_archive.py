"""Where the archiver puts things in deep storage, and how names encode Kafka offsets.

Data files, partitioned by **event** hour::

    raw/{topic}/dt=YYYY-MM-DD/hour=HH/{topic}+{partition}+{firstOffset}+{lastOffset}.parquet

One flush of one Kafka partition covers a contiguous offset range ``[first, last]`` and may write
several files (one per event hour it touched); every file of that flush carries the flush's range in
its name, so the range identifies the flush. Before a flush's files are moved into place, its
manifest is written::

    raw/_manifests/{topic}/{partition}/{first:020d}-{last:020d}.json

listing the data keys; after the offsets are committed the manifest is deleted. A manifest found at
start-up is a flush whose commit may not have happened: see :mod:`realtime.archiver.recovery`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from radstack.storage.metadata import MetadataStore

RAW_PREFIX = "raw"
MANIFEST_DIR = "_manifests"
DATA_EXT = "parquet"
HOUR_MS = 3_600_000
"""The archive's partitioning step: event hours, floored (an event before 1970 belongs to the hour it
is in, not the one after it)."""

PARSED_COLUMN = "parsed"
"""Archive column: true when the record is a JSON object whose every top-level member is in the parsed
columns below, exactly as the rebuild's JSON reader would read it (null or false: read the raw value)."""

PARSED_KINDS: dict[str, str] = {"string": "string", "long": "bigint", "double": "double", "bool": "boolean"}
"""The kinds a top-level member's value is archived as (kind → Spark SQL type); one column per
(kind, member) that occurs in the file, named by :func:`parsed_column`."""


def parsed_column(kind: str, member: str) -> str:
    """The archive column holding ``member``'s values of ``kind`` (``p:long:price``). A capital is
    written ``^`` and its small letter (``City`` → ``p:string:^city``; ``^`` itself ``^^``): Spark
    resolves Parquet columns without case, JSON members are read with it."""
    name = "".join("^^" if ch == "^" else ("^" + ch.lower() if ch != ch.lower() else ch) for ch in member)
    return f"p:{kind}:{name}"


_NAME_RE = re.compile(r"^(?P<topic>.+)\+(?P<partition>\d+)\+(?P<first>\d+)\+(?P<last>\d+)\.(?P<ext>[a-z.]+)$")


@dataclass(frozen=True)
class FlushRange:
    topic: str
    partition: int
    first: int
    last: int


def input_topics(source: Mapping[str, Any], data_source: str) -> tuple[str, ...]:
    """The topics an ``archive`` input source reads: ``topics``, else ``topic``, else the datasource's name
    (the batch job reads them; the task API asks READ on them)."""
    topics = source.get("topics") or ([source["topic"]] if source.get("topic") else [data_source])
    return tuple(str(t) for t in topics)


def hour_dir(topic: str, hour_start_ms: int) -> str:
    dt = datetime.fromtimestamp(hour_start_ms / 1000, tz=UTC)
    return f"{RAW_PREFIX}/{topic}/dt={dt:%Y-%m-%d}/hour={dt:%H}"


def data_key(topic: str, partition: int, first: int, last: int, hour_start_ms: int) -> str:
    return f"{hour_dir(topic, hour_start_ms)}/{topic}+{partition}+{first}+{last}.{DATA_EXT}"


def manifest_prefix(topic: str, partition: int) -> str:
    return f"{RAW_PREFIX}/{MANIFEST_DIR}/{topic}/{partition}/"


def manifest_key(topic: str, partition: int, first: int, last: int) -> str:
    return f"{manifest_prefix(topic, partition)}{first:020d}-{last:020d}.json"


def parse_data_name(key: str) -> FlushRange | None:
    """The flush range in a data file's name, or None for anything else."""
    m = _NAME_RE.match(key.rsplit("/", 1)[-1])
    if not m:
        return None
    return FlushRange(m["topic"], int(m["partition"]), int(m["first"]), int(m["last"]))


def topic_prefix(topic: str) -> str:
    return f"{RAW_PREFIX}/{topic}/"


def hour_prefix(topic: str, hour_start_ms: int) -> str:
    return hour_dir(topic, hour_start_ms) + "/"


# -- the archive's completeness watermark, kept in the metadata store by realtime.archiver --------


def watermark_key(topic: str) -> str:
    return f"archiver.watermark.{topic}"


def stats_key(group: str) -> str:
    return f"archiver.stats.{group}"


def archive_watermark(metadata: MetadataStore, topic: str) -> int | None:
    """The stored watermark of ``topic`` in epoch millis, or None when the archiver never ran."""
    state = metadata.get_state(watermark_key(topic))
    return int(state["watermark"]) if state and state.get("watermark") is not None else None
