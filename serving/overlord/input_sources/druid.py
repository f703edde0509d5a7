"""``druid`` (Druid's ``DruidInputSource``): re-index rows radstack already serves — the segments of
``dataSource`` visible in its timeline for ``interval`` (the newest version of each chunk), read from deep
storage. It is the only way a task reads radstack's own data: deep storage, the segment cache, the raw
archive and the metadata store are never reachable through ``local``, ``s3`` or ``hdfs``
(:mod:`serving.input_policy`), and the task API asks READ on ``dataSource`` for it
(:func:`serving.overlord.api.submit_task`), as Druid's does.

Each row comes with ``__time`` as epoch milliseconds (``"timestampSpec": {"column": "__time", "format":
"millis"}``) and every dimension and metric column of its segment; ``dimensions`` / ``metrics`` narrow the
columns, as in Druid. Rows outside ``interval`` are dropped. No ``inputFormat`` is needed (any given is
ignored): segments are Parquet."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from radstack.config import Settings
from radstack.storage.deep_storage import open_deep_storage
from radstack.storage.metadata import MetadataStore
from radstack.storage.segments import DataSegment
from radstack.storage.timeline import VersionedIntervalTimeline
from radstack.time.intervals import Interval
from serving.overlord.input_sources.base import InputEntity, InputSource, InputSpecError, str_list

TIME = "__time"


def _interval(spec: Mapping[str, Any], path: str) -> Interval:
    raw = spec.get("interval")
    if not isinstance(raw, str) or not raw:
        raise InputSpecError(f"{path}.interval: required (an ISO-8601 interval, e.g. 2024-01-01/2024-02-01)")
    try:
        return Interval.parse(raw)
    except (ValueError, TypeError) as e:
        raise InputSpecError(f"{path}.interval: not an ISO-8601 interval: {raw!r} ({e})") from None


class DruidSource(InputSource):
    type = "druid"
    input_format = {"type": "parquet"}

    def validate(self, spec: Mapping[str, Any], path: str) -> None:
        ds = spec.get("dataSource")
        if not isinstance(ds, str) or not ds:
            raise InputSpecError(f"{path}.dataSource: required (the datasource to re-index)")
        _interval(spec, path)
        for key in ("dimensions", "metrics"):
            if spec.get(key) is not None:
                str_list(spec[key], f"{path}.{key}")
        if spec.get("filter") is not None:
            raise InputSpecError(f"{path}.filter: not supported; filter in the task's transformSpec instead")

    def resolve(self, spec: Mapping[str, Any], settings: Settings) -> list[InputEntity]:
        interval = _interval(spec, "spec.ioConfig.inputSource")
        with MetadataStore.from_settings(settings, create=False) as md:
            used = md.segments(str(spec["dataSource"]), interval=interval)
        timeline = VersionedIntervalTimeline.from_segments(used, str(spec["dataSource"]))
        seen: dict[str, DataSegment] = {}
        for visible in timeline.visible_segments(interval):
            seen.setdefault(visible.segment.identifier, visible.segment)
        storage = open_deep_storage(settings)
        columns = _columns(spec)
        return [InputEntity(f"druid:{seg.identifier}", (lambda seg=seg: _rows(storage, seg, interval, columns)),
                            seg.size or None)
                for seg in sorted(seen.values(), key=lambda s: s.id.sort_key())]


def _columns(spec: Mapping[str, Any]) -> list[str] | None:
    if spec.get("dimensions") is None and spec.get("metrics") is None:
        return None
    return [TIME, *str_list(spec.get("dimensions") or [], "dimensions"), *str_list(spec.get("metrics") or [], "metrics")]


def _rows(storage: Any, seg: DataSegment, interval: Interval, columns: list[str] | None) -> BinaryIO:
    """One segment's rows inside ``interval``, ``__time`` as epoch millis, as a Parquet stream."""
    table = pq.read_table(io.BytesIO(storage.get_bytes(storage.key_for_load_spec(seg.load_spec))))
    if columns is not None:
        table = table.select([c for c in dict.fromkeys(columns) if c in table.column_names])
    millis = pc.cast(table[TIME], pa.timestamp("ms")).cast(pa.int64())
    if not (interval.start <= seg.interval.start and seg.interval.end <= interval.end):
        keep = pc.and_(pc.greater_equal(millis, interval.start), pc.less(millis, interval.end))
        table, millis = table.filter(keep), millis.filter(keep)
    table = table.set_column(table.column_names.index(TIME), TIME, millis)
    out = io.BytesIO()
    pq.write_table(table, out)
    out.seek(0)
    return out


SOURCE = DruidSource()
