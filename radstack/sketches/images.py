"""Reading many serialized sketches at once: the bytes and offsets of an Arrow binary array, loads of
any width at any byte position, and runs of fixed-size items — the numpy pieces the vectorised merges
(:mod:`radstack.sketches.hll_merge`, :mod:`radstack.sketches.theta_merge`) share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa


def one_array(lists: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The lists as one array (DuckDB hands a UDF a chunked array; one chunk is taken as it is)."""
    if isinstance(lists, pa.ChunkedArray):
        return lists.chunk(0) if lists.num_chunks == 1 else lists.combine_chunks()
    return lists


def flatten(lists: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, np.ndarray, int]:
    """The non-null items of every list, the list (group) each came from, and the number of lists."""
    lists = one_array(lists)
    items = lists.flatten()
    group = np.repeat(np.arange(len(lists)), np.asarray(lists.value_lengths().fill_null(0), np.int64))
    if items.null_count:
        present = np.asarray(items.is_valid())
        items, group = items.filter(pa.array(present)), group[present]
    return items, group, len(lists)


def buffers(blobs: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The bytes of a binary array (padded to at least 8) and its ``len + 1`` offsets."""
    blobs = blobs.cast(pa.binary()) if pa.types.is_large_binary(blobs.type) else blobs
    _, offsets, values = blobs.buffers()
    data = np.frombuffer(values, np.uint8) if values is not None else np.zeros(0, np.uint8)
    data = data if len(data) >= 8 else np.concatenate([data, np.zeros(8, np.uint8)])
    return data, np.frombuffer(offsets, np.int32)[blobs.offset: blobs.offset + len(blobs) + 1].astype(np.int64)


def unaligned(data: np.ndarray, dtype: str) -> np.ndarray:
    """A view of ``data`` whose element ``j`` is the ``dtype`` (little-endian) starting at byte ``j``."""
    width = np.dtype(dtype).itemsize
    return np.ndarray((max(len(data) - width + 1, 0),), dtype, data, strides=(1,))


def spans(starts: np.ndarray, counts: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """For runs of ``counts[i]`` items of ``width`` bytes from ``starts[i]``: each item's byte position
    and the run it belongs to."""
    if len(counts) and counts.min() == counts.max() == 1:
        return starts, np.arange(len(starts))
    run = np.repeat(np.arange(len(counts)), counts)
    step = np.full(len(run), width, np.int64)
    live = np.flatnonzero(counts)
    first = (np.cumsum(counts) - counts)[live]
    ends = starts[live] + width * (counts[live] - 1)  # the last item of each run
    step[first] = starts[live] - np.concatenate([[0], ends[:-1]])
    return np.cumsum(step), run


def where_all(mask: np.ndarray, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """``arrays`` where ``mask`` holds (no copy when it holds everywhere: the common case)."""
    return arrays if mask.all() else tuple(a[mask] for a in arrays)


def merged_one_at_a_time(merge: Callable[[list[Any]], bytes], items: list[Any] | None) -> bytes | None:
    """A group the vectorised merges cannot read, merged by the library one sketch at a time; None when
    one of its sketches is unreadable (the UDF's answer for that group, as before them)."""
    try:
        return merge(items or [])
    except Exception:  # noqa: BLE001 - an unreadable sketch fails its group only
        return None
