"""Segment identity and the DataSegment descriptor, exactly as Druid writes them.

A segment is one immutable time chunk of one datasource. Its id is
``dataSource_start_end_version[_partitionNum]`` (partition only when ≠ 0) and its descriptor — the
``payload`` column of ``druid_segments`` and the ``descriptor.json`` beside the data in deep storage —
has Druid's DataSegment shape: ``dataSource``, ``interval``, ``version``, ``loadSpec``,
``dimensions`` and ``metrics`` (comma-joined), ``shardSpec``, ``binaryVersion``, ``size``,
``identifier``. radstack adds ``numRows`` (Druid reports it from historicals, not the payload) and,
for segments built with aggregate projections, ``projections`` (name, spec, ``loadSpec``, ``numRows`` of
each projection file; Druid keeps projections inside its segment files instead).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from radstack.time.intervals import Interval, format_instant, parse_instant

BINARY_VERSION = 9
"""Druid's segment binary version; radstack's Parquet segments declare the same for tooling."""

SHARD_TYPES = ("numbered", "linear", "tombstone", "hashed", "single", "range", "none", "numbered_overwrite")


@dataclass(frozen=True)
class ShardSpec:
    """Druid shard spec. ``numbered`` with ``partitions = N > 0`` forms a core set of N that is
    complete only when 0..N−1 are all present; ``partitions = 0`` (appends, real-time) and
    ``linear`` are always complete. ``tombstone`` marks an interval with no data."""

    type: str = "numbered"
    partition_num: int = 0
    partitions: int = 1
    extra: tuple[tuple[str, Any], ...] = ()  # e.g. hashed: partitionDimensions, numBuckets

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> ShardSpec:
        if not d:
            return cls(type="none", partition_num=0, partitions=1)
        typ = d.get("type", "numbered")
        pn = int(d.get("partitionNum", 0))
        if typ == "linear":
            parts = 0
        elif typ in ("tombstone", "none", "single"):
            parts = int(d.get("partitions", d.get("numCorePartitions", 1)) or 1)
        else:
            parts = int(d.get("partitions", d.get("numCorePartitions", 0)))
        known = {"type", "partitionNum", "partitions"}
        extra = tuple(sorted((k, v) for k, v in d.items() if k not in known and _hashable(v)))
        return cls(type=typ, partition_num=pn, partitions=parts, extra=extra)

    def to_json(self) -> dict[str, Any]:
        if self.type == "linear":
            out: dict[str, Any] = {"type": "linear", "partitionNum": self.partition_num}
        elif self.type == "none":
            out = {"type": "none"}
        else:
            out = {"type": self.type, "partitionNum": self.partition_num, "partitions": self.partitions}
        out.update(dict(self.extra))
        return out

    @property
    def is_tombstone(self) -> bool:
        return self.type == "tombstone"


def _hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


@dataclass(frozen=True)
class SegmentId:
    data_source: str
    interval: Interval
    version: str
    partition_num: int = 0

    def __str__(self) -> str:
        base = f"{self.data_source}_{format_instant(self.interval.start)}_{format_instant(self.interval.end)}_{self.version}"
        return base if self.partition_num == 0 else f"{base}_{self.partition_num}"

    def sort_key(self) -> tuple[str, int, int, str, int]:
        """Druid's order: datasource, start, end, version (string), partition."""
        return (self.data_source, self.interval.start, self.interval.end, self.version, self.partition_num)

    @classmethod
    def parse(cls, text: str, data_source: str | None = None) -> SegmentId:
        """Parse an id. Datasource names may contain ``_``, so pass it when known (Druid does the
        same: ``SegmentId.tryParse(dataSource, id)``); otherwise the first parse that yields two valid
        instants wins."""
        if data_source is not None:
            if not text.startswith(data_source + "_"):
                raise ValueError(f"segment id {text!r} does not start with {data_source!r}")
            rest = text[len(data_source) + 1 :]
            parsed = _parse_rest(rest)
            if parsed is None:
                raise ValueError(f"cannot parse segment id {text!r}")
            iv, version, pn = parsed
            return cls(data_source, iv, version, pn)
        parts = text.split("_")
        for i in range(1, len(parts) - 2):
            parsed = _parse_rest("_".join(parts[i:]))
            if parsed is not None:
                iv, version, pn = parsed
                return cls("_".join(parts[:i]), iv, version, pn)
        raise ValueError(f"cannot parse segment id {text!r}")


def _parse_rest(rest: str) -> tuple[Interval, str, int] | None:
    parts = rest.split("_")
    if len(parts) < 3:
        return None
    try:
        start, end = parse_instant(parts[0]), parse_instant(parts[1])
    except ValueError:
        return None
    tail = parts[2:]
    pn = 0
    if len(tail) > 1 and tail[-1].isdigit():
        pn = int(tail[-1])
        tail = tail[:-1]
    return Interval(start, end), "_".join(tail), pn


@dataclass(frozen=True)
class DataSegment:
    """Druid's DataSegment: what a segment is and where its files are."""

    data_source: str
    interval: Interval
    version: str
    load_spec: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    dimensions: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    shard_spec: ShardSpec = field(default_factory=ShardSpec)
    size: int = 0
    num_rows: int = 0
    binary_version: int = BINARY_VERSION
    last_compaction_state: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    # radstack extension: the segment's projection files, each {"name", "spec", "loadSpec", "numRows"}
    projections: tuple[dict[str, Any], ...] = field(default=(), compare=False, hash=False)

    @property
    def id(self) -> SegmentId:
        return SegmentId(self.data_source, self.interval, self.version, self.shard_spec.partition_num)

    @property
    def identifier(self) -> str:
        return str(self.id)

    @property
    def partition_num(self) -> int:
        return self.shard_spec.partition_num

    @property
    def is_tombstone(self) -> bool:
        return self.shard_spec.is_tombstone

    def with_load_spec(self, load_spec: dict[str, Any], size: int | None = None) -> DataSegment:
        return replace(self, load_spec=load_spec, size=self.size if size is None else size)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "dataSource": self.data_source,
            "interval": self.interval.iso(),
            "version": self.version,
            "loadSpec": self.load_spec,
            "dimensions": ",".join(self.dimensions),
            "metrics": ",".join(self.metrics),
            "shardSpec": self.shard_spec.to_json(),
            "binaryVersion": self.binary_version,
            "size": self.size,
            "identifier": self.identifier,
            "numRows": self.num_rows,
        }
        if self.last_compaction_state is not None:
            out["lastCompactionState"] = self.last_compaction_state
        if self.projections:
            out["projections"] = [dict(p) for p in self.projections]
        return out

    def to_payload(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"))

    @classmethod
    def from_json(cls, d: dict[str, Any] | str) -> DataSegment:
        if isinstance(d, str | bytes):
            d = json.loads(d)
        assert isinstance(d, dict)
        dims = d.get("dimensions") or ""
        mets = d.get("metrics") or ""
        return cls(
            data_source=d["dataSource"],
            interval=Interval.parse(d["interval"]),
            version=str(d["version"]),
            load_spec=dict(d.get("loadSpec") or {}),
            dimensions=tuple(x for x in (dims.split(",") if isinstance(dims, str) else dims) if x),
            metrics=tuple(x for x in (mets.split(",") if isinstance(mets, str) else mets) if x),
            shard_spec=ShardSpec.from_json(d.get("shardSpec")),
            size=int(d.get("size", 0)),
            num_rows=int(d.get("numRows", 0)),
            binary_version=int(d.get("binaryVersion", BINARY_VERSION)),
            last_compaction_state=d.get("lastCompactionState"),
            projections=tuple(dict(p) for p in d.get("projections") or () if isinstance(p, dict)),
        )


#: where segment files live in deep storage: ``segments/{segment_path}/…``
SEGMENTS_PREFIX = "segments/"


def segment_path(segment_id: SegmentId) -> str:
    """Deep-storage key prefix for a segment, laid out as Druid does:
    ``{dataSource}/{start}_{end}/{version}/{partitionNum}``; ``:`` becomes ``_`` because HDFS
    forbids it in path names (Druid's HDFS pusher does the same)."""
    iv = f"{format_instant(segment_id.interval.start)}_{format_instant(segment_id.interval.end)}"
    return "/".join(
        part.replace(":", "_")
        for part in (segment_id.data_source, iv, segment_id.version, str(segment_id.partition_num))
    )


def layout_folder(segment_id: SegmentId) -> str:
    """The deep-storage folder of a segment's files, by the layout: ``segments/{segment_path}/``."""
    return f"{SEGMENTS_PREFIX}{segment_path(segment_id)}/"


def folder_of_key(key: str) -> str | None:
    """``segments/{ds}/{start}_{end}/{version}/{partition}/…`` (a file, or the folder itself) → that
    partition's folder with a trailing ``/``; None for a key outside that layout."""
    if not key.startswith(SEGMENTS_PREFIX):
        return None
    parts = key.split("/")
    if len(parts) < 6 or not all(parts[:5]):
        return None
    return "/".join(parts[:5]) + "/"


def merged_segment_id(data_source: str, interval: Interval) -> str:
    """The id Druid's ``segmentMetadata`` gives an analysis merged over several segments."""
    return f"{data_source}_{format_instant(interval.start)}_{format_instant(interval.end)}_merged"
