"""Publishing: make indexed segments visible, all at once.

:func:`publish` first writes each segment's ``descriptor.json`` (the DataSegment JSON, Druid's
layout) beside its data in deep storage, then inserts every ``druid_segments`` row — and marks the
segments it replaces unused — in ONE metadata transaction, so readers see the whole set or none of it.
A failure before the transaction leaves at most orphan descriptors, which nothing reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import orjson

from radstack.storage.deep_storage.base import DeepStorage
from radstack.storage.segment_format import DESCRIPTOR_FILE, segment_descriptor_key
from radstack.storage.segments import DataSegment

__all__ = ["publish", "descriptor_bytes", "descriptor_key"]


class _Metadata(Protocol):
    def publish(
        self, segments: Sequence[DataSegment], *, mark_unused_ids: Iterable[str] = (), **kw: Any
    ) -> None: ...


class _DeepStorage(Protocol):
    def put_bytes(self, data: bytes, key: str) -> dict[str, Any]: ...


def descriptor_bytes(segment: DataSegment) -> bytes:
    """The ``descriptor.json`` content for a segment."""
    return orjson.dumps(segment.to_json(), option=orjson.OPT_INDENT_2)


def descriptor_key(deep_storage: DeepStorage, segment: DataSegment) -> str:
    """Where ``descriptor.json`` goes: beside the data its ``loadSpec`` points at (when the deep
    storage can map a loadSpec back to a key), else under ``segments/{segment_path(id)}/``."""
    to_key = getattr(deep_storage, "key_for_load_spec", None)
    if to_key is not None and segment.load_spec:
        try:
            data_key = str(to_key(segment.load_spec))
        except (ValueError, KeyError, RuntimeError):
            data_key = ""
        if "/" in data_key:
            return data_key.rsplit("/", 1)[0] + "/" + DESCRIPTOR_FILE
    return segment_descriptor_key(segment.id)


def publish(
    metadata: _Metadata,
    deep_storage: _DeepStorage,
    segments: Sequence[DataSegment],
    *,
    mark_unused_ids: Iterable[str] = (),
    state: Mapping[str, Any] | None = None,
    corrections: Sequence[Any] = (),
) -> None:
    """Write descriptors, then publish ``segments`` and mark ``mark_unused_ids`` unused in one
    transaction (with ``state`` rows and ``corrections`` — :class:`~radstack.storage.metadata.CorrectionRow`
    — written in that same transaction when given). Raises (and publishes nothing) when the metadata
    store refuses the set."""
    segments = list(segments)
    ids = [s.identifier for s in segments]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"duplicate segment ids in one publish: {', '.join(dup)}")
    for seg in segments:
        deep_storage.put_bytes(descriptor_bytes(seg), descriptor_key(deep_storage, seg))
    extra: dict[str, Any] = {}
    if state:
        extra["state"] = dict(state)
    if corrections:
        extra["corrections"] = list(corrections)
    metadata.publish(segments, mark_unused_ids=tuple(mark_unused_ids), **extra)
