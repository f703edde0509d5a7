"""Merging many serialized theta sketches at once: whole Arrow arrays decoded with numpy.

A compact theta sketch is its theta (a threshold on 63-bit hashes) and the hashes it kept below it. The
union of a group's sketches with nominal size ``k`` is fixed by them alone (measured on the library):
the distinct hashes below the smallest theta; when more than ``k`` of them, the ``k`` smallest, and
theta becomes the next one. Here the hashes of every image of a batch are read in a few numpy passes,
each group's ``k`` smallest distinct hashes found with ``numpy.partition`` (linear, no full sort), and
one compact image per group is handed to the real library's union, whose result is the answer: the
estimators and the serialized form stay DataSketches' own. ``tests/unit/test_theta_merge.py`` checks it
against the one-sketch-at-a-time union (``radstack.sketches.aggregate``) byte for byte.

Images read here: serial version 3, compact, with the default seed's hash — what the library and
Druid's Java one serialize. Anything else (an older serial version, the compressed version 4, another
seed, a truncated image) sends its group through the one-at-a-time union, so an unreadable sketch fails
its group exactly as before.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import datasketches as ds
import numpy as np
import pyarrow as pa

from radstack.sketches.images import (
    buffers,
    flatten,
    merged_one_at_a_time,
    one_array,
    spans,
    unaligned,
    where_all,
)

_PRE_LONGS, _SER_VER, _FAMILY, _FLAGS, _SEED_HASH = 0, 1, 2, 5, 6
_SERIAL_VERSION, _COMPACT_FAMILY = 3, 3
_EMPTY, _COMPACT, _ORDERED, _READ_ONLY = 4, 8, 16, 2
_NO_THETA = (1 << 63) - 1  # theta of a sketch that kept every hash (exact mode)
_DEFAULT_SEED_HASH = ds.update_theta_sketch().compact().get_seed_hash()


def _one_layout(blobs: pa.Array) -> np.ndarray | None:
    """The hashes, when every image is a compact single-hash image with the same preamble (the per-row
    sketches of data ingested without rollup), read as one block; else None."""
    data, offs = buffers(blobs)
    n, width = len(offs) - 1, 16
    if n == 0 or offs[-1] - offs[0] != n * width or not (np.diff(offs) == width).all():
        return None
    first = data[offs[0]: offs[0] + 8].tolist()
    if (first[_PRE_LONGS] & 0x3F != 1 or first[_SER_VER] != _SERIAL_VERSION or first[_FAMILY] != _COMPACT_FAMILY
            or first[_FLAGS] & (_EMPTY | _COMPACT) != _COMPACT
            or first[_SEED_HASH] | first[_SEED_HASH + 1] << 8 != _DEFAULT_SEED_HASH):
        return None
    block = data[offs[0]: offs[-1]]
    words = (block if offs[0] % 8 == 0 else np.ascontiguousarray(block)).view("<i8").reshape(n, 2)
    return words[:, 1] if (words[:, 0] == words[0, 0]).all() else None


def single_hashes(blobs: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The hash of every image that is a compact single-hash sketch of the default seed (a per-row sketch
    of data ingested without rollup), as int64; null for any other image. Such a sketch is exact (theta
    1.0), so its hash alone merges it (``merge_theta_lists(singles=…)``): the broker keeps it in an
    integer column beside the sketch (:mod:`serving.broker.store.segment_cache`)."""
    blobs = one_array(blobs)
    data, offs = buffers(blobs)
    start, length = offs[:-1], np.diff(offs)
    fits = length == 16
    if blobs.null_count:
        fits &= np.asarray(blobs.is_valid())
    at = np.where(fits, start, 0)
    head = unaligned(data, "<u8")[at].view(np.uint8).reshape(-1, 8)
    seed = head[:, _SEED_HASH].astype(np.uint16) | (head[:, _SEED_HASH + 1].astype(np.uint16) << 8)
    value = unaligned(data, "<u8")[np.where(fits, start + 8, 0)].view(np.int64)
    fits &= (((head[:, _PRE_LONGS] & 0x3F) == 1) & (head[:, _SER_VER] == _SERIAL_VERSION)
             & (head[:, _FAMILY] == _COMPACT_FAMILY) & ((head[:, _FLAGS] & (_EMPTY | _COMPACT)) == _COMPACT)
             & (seed == _DEFAULT_SEED_HASH) & (value > 0))
    return pa.array(value, pa.int64(), mask=~fits)


def _read(blobs: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each image's theta, hash count and first hash's byte position, whether it was read, and the bytes."""
    data, offs = buffers(blobs)
    start, length = offs[:-1], np.diff(offs)
    head = unaligned(data, "<u8")[np.where(length >= 8, start, 0)].view(np.uint8).reshape(-1, 8)
    pre_longs = head[:, _PRE_LONGS] & 0x3F
    empty = (head[:, _FLAGS] & _EMPTY) != 0
    seed = head[:, _SEED_HASH].astype(np.uint16) | (head[:, _SEED_HASH + 1].astype(np.uint16) << 8)
    ok = ((length >= 8) & (head[:, _SER_VER] == _SERIAL_VERSION) & (head[:, _FAMILY] == _COMPACT_FAMILY)
          & ((head[:, _FLAGS] & _COMPACT) != 0) & (pre_longs >= 1) & (pre_longs <= 3)
          & ((seed == _DEFAULT_SEED_HASH) | empty))
    u32, u64 = unaligned(data, "<u4"), unaligned(data, "<u8")
    count = np.where(pre_longs == 1, 1, 0).astype(np.int64)
    counted = np.flatnonzero(ok & (pre_longs >= 2) & (length >= 16))
    count[counted] = u32[start[counted] + 8]
    count[empty] = 0
    theta = np.full(len(start), _NO_THETA, np.int64)
    estimating = np.flatnonzero(ok & (pre_longs == 3) & (length >= 24))
    theta[estimating] = u64[start[estimating] + 16].view(np.int64)
    first = start + 8 * pre_longs.astype(np.int64)
    ok &= length == np.where(empty & (pre_longs == 1), 8, 8 * pre_longs.astype(np.int64) + 8 * count)
    return theta, np.where(ok, count, 0), first, ok, data


def _smallest_distinct(hashes: np.ndarray, k: int) -> np.ndarray:
    """The (at most) ``k + 1`` smallest distinct values of ``hashes`` (non-negative), sorted.

    The distinct values below a threshold are all kept; when more than ``k`` of them, their ``k + 1``
    smallest are the answer. Hashes are uniform, so a threshold of ``2 (k + 1) / n`` of their range
    usually holds enough when the values are distinct, and each miss raises it by what the repeats so
    far need: a comparison pass over ``hashes`` each, no partition or sort of all of them."""
    n = len(hashes)
    if n <= 4 * (k + 1):
        return np.unique(hashes)[: k + 1]
    top = float(1 << 63)
    threshold = 2.0 * (k + 1) / n * top
    while threshold < top:
        found = np.unique(hashes[hashes < np.int64(threshold)])
        if len(found) > k:
            return found[: k + 1]
        threshold *= max(2.0, (k + 1) / max(len(found), 1) * 1.25)
    return np.unique(hashes)[: k + 1]


def _compact_image(hashes: np.ndarray, theta: int) -> bytes:
    """A compact, ordered image (serial version 3) of sorted ``hashes`` below ``theta``."""
    flags = _COMPACT | _ORDERED | _READ_ONLY
    head = struct.pack("<BBBBBBH", 3, _SERIAL_VERSION, _COMPACT_FAMILY, 0, 0, flags, _DEFAULT_SEED_HASH)
    return head + struct.pack("<IIq", len(hashes), 0, theta) + hashes.astype("<i8").tobytes()


def merge_theta_lists(lists: pa.Array, lg_k: int, one_at_a_time: Callable[[list[Any]], bytes],
                      singles: pa.Array | None = None) -> list[bytes | None]:
    """Each list of serialized theta sketches merged into one of nominal size ``2**lg_k``.

    A null list merges nothing (an empty sketch); null sketches are skipped. ``one_at_a_time`` merges
    a group this module cannot read (see the module notes): its exception leaves that group None.
    ``singles``, when given, holds for each group more sketches as their hashes (:func:`single_hashes`
    of single-hash images: the group's sketches are its images and these).
    """
    blobs, group, n_groups = flatten(lists)
    unreadable = np.zeros(n_groups, bool)
    group_theta = np.full(n_groups, _NO_THETA, np.int64)
    hashes = _one_layout(blobs)
    if hashes is not None:
        hash_group = group
    else:
        theta, count, first, ok, data = _read(blobs)
        unreadable[group[~ok]] = True
        np.minimum.at(group_theta, group[ok], theta[ok])
        pos, run = spans(first, count, 8)
        hashes = unaligned(data, "<u8")[pos].view(np.int64)
        hash_group = group[run]
    if singles is not None:
        values, owner, _ = flatten(singles)
        if len(values) and not len(hashes):
            hashes, hash_group = np.asarray(values, np.int64), owner
        elif len(values):
            order = np.argsort(np.concatenate([hash_group, owner]), kind="stable")  # groups in order again
            hashes = np.concatenate([hashes, np.asarray(values, np.int64)])[order]
            hash_group = np.concatenate([hash_group, owner])[order]
    if (group_theta != _NO_THETA).any():
        below = hashes < group_theta[hash_group]
        hashes, hash_group = where_all(below, hashes, hash_group)
    bounds = np.searchsorted(hash_group, np.arange(n_groups + 1))  # groups come in order
    k = 1 << lg_k
    out: list[bytes | None] = []
    for g in range(n_groups):
        if unreadable[g]:
            out.append(merged_one_at_a_time(one_at_a_time, lists[g].as_py()))
            continue
        kept = _smallest_distinct(hashes[bounds[g]:bounds[g + 1]], k)
        g_theta = int(group_theta[g])
        if len(kept) > k:
            g_theta, kept = int(kept[k]), kept[:k]
        union = ds.theta_union(lg_k)
        if len(kept) or g_theta != _NO_THETA:
            union.update(ds.compact_theta_sketch.deserialize(_compact_image(kept, g_theta)))
        out.append(bytes(union.get_result().serialize()))
    return out
