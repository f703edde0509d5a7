"""Merging many serialized HLL sketches at once: whole Arrow arrays decoded with numpy, not one sketch
object per row.

A query merging ingested sketches (``APPROX_COUNT_DISTINCT_DS_HLL(users_hll)``) hands over, per group,
the list of its rows' sketches: a million rows are a million small images. Deserializing each through
the DataSketches binding runs at about 2 M sketches a second; here every image of a batch is read in a
few numpy passes and each group's union is formed directly:

* **coupons** (list- and set-mode images, the common case of per-row sketches: a 26-bit slot and a 6-bit
  value per distinct hash) and **registers** (HLL-mode images: 4-, 6- or 8-bit arrays, HLL_4's
  exceptions in its aux table) are read from the bytes of all images together;
* a group's HLL registers are the maximum, slot by slot, over its coupons and registers
  (``numpy.maximum.at``), exactly what a DataSketches union keeps in HLL mode;
* a group whose distinct coupons a union would still hold as a list or set (at most 7, or 3/32 of the
  registers from ``lgK`` 8: :func:`coupon_capacity`) keeps them: it gets a set-mode image of its
  distinct coupons instead.

The group's answer is then one small image handed to the real library, whose union turns it into the
sketch of the requested type and ``lgK``: the estimators, the HLL_4 packing and the serialized form stay
DataSketches' own. The answer equals the one-sketch-at-a-time union's (``radstack.sketches.aggregate``;
``tests/unit/test_hll_merge.py`` checks both on every layout and mode).

Images this module does not read (another family, a serial version it does not know, a truncated
image, an HLL-mode source with a smaller ``lgK`` than the union's) send their group through that
one-at-a-time union, so an unreadable sketch fails its group exactly as before.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import datasketches as ds
import numpy as np
import pyarrow as pa

from radstack.sketches import registers_only
from radstack.sketches.images import (
    buffers,
    flatten,
    merged_one_at_a_time,
    one_array,
    spans,
    unaligned,
    where_all,
)

# the preamble, bytes 0–7 of every HLL image (little-endian)
_PRE_INTS, _SER_VER, _FAMILY, _LG_K, _LG_ARR, _FLAGS, _COUNT_OR_CUR_MIN, _MODE = range(8)
_HLL_FAMILY, _SERIAL_VERSION = 7, 1
_EMPTY, _COMPACT, _OUT_OF_ORDER = 4, 8, 16
_LIST, _SET, _HLL = 0, 1, 2
_HLL_4, _HLL_6, _HLL_8 = 0, 1, 2
# where the coupons start in list / set images, and the HLL-mode header's size and fields
_LIST_START, _SET_START, _HLL_START = 8, 12, 40
_AUX_COUNT = 36  # int32: HLL_4's exceptions kept in the aux table
_AUX_TOKEN = 15  # an HLL_4 nibble whose value is in the aux table
_SLOT_BITS = 26
#: bytes of registers (one byte per register and group) merged at a time: 16 MiB, 4,096 groups of lgK 12
REGISTER_BUDGET = 1 << 24


def coupon_capacity(lg_k: int) -> int:
    """The most distinct coupons a union of ``lgK`` keeps before it turns to HLL registers (measured on
    the library: a list of 7 below ``lgK`` 8, else a set of 3/32 of the registers)."""
    return 7 if lg_k < 8 else 3 * (1 << lg_k) // 32


def _one_list_layout(blobs: pa.Array) -> tuple[np.ndarray, int] | None:
    """The coupons of every image, when all are compact list-mode images with the same preamble (the
    per-row sketches of data ingested without rollup: one coupon each), read as one block; else None."""
    data, offs = buffers(blobs)
    n = len(offs) - 1
    if n == 0 or not 8 < (width := int(offs[1] - offs[0])) <= _LIST_START + 4 * 7:
        return None
    if offs[-1] - offs[0] != n * width or not (np.diff(offs) == width).all():
        return None
    first = data[offs[0]: offs[0] + 8].tolist()
    if (first[_PRE_INTS] != 2 or first[_SER_VER] != _SERIAL_VERSION or first[_FAMILY] != _HLL_FAMILY
            or not 4 <= first[_LG_K] <= 21 or first[_FLAGS] & (_EMPTY | _COMPACT) != _COMPACT
            or first[_MODE] & 3 != _LIST or first[_MODE] >> 2 > _HLL_8
            or width != _LIST_START + 4 * first[_COUNT_OR_CUR_MIN]):
        return None
    if offs[0] % 4 == 0:  # 4-byte words in place: no copy
        words = data[offs[0]: offs[-1]].view("<u4").reshape(n, width // 4)
    else:
        words = np.ascontiguousarray(data[offs[0]: offs[-1]]).view("<u4").reshape(n, width // 4)
    if not ((words[:, 0] == words[0, 0]).all() and (words[:, 1] == words[0, 1]).all()):
        return None
    return words[:, _LIST_START // 4:].ravel(), first[_COUNT_OR_CUR_MIN]


def single_coupons(blobs: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The coupon of every image that is a compact list of exactly one coupon (a per-row sketch of data
    ingested without rollup), as int64; null for any other image. A union adds such an image's coupon
    and nothing else, so the coupon alone merges it (``merge_hll_lists(singles=…)``): the broker keeps it
    in an integer column beside the sketch (:mod:`serving.broker.store.segment_cache`), which DuckDB collects
    many times faster than the images."""
    blobs = one_array(blobs)
    data, offs = buffers(blobs)
    start, length = offs[:-1], np.diff(offs)
    fits = length == _LIST_START + 4
    if blobs.null_count:
        fits &= np.asarray(blobs.is_valid())
    head = unaligned(data, "<u8")[np.where(fits, start, 0)].view(np.uint8).reshape(-1, 8)
    coupon = unaligned(data, "<u4")[np.where(fits, start + _LIST_START, 0)].astype(np.int64)
    fits &= ((head[:, _PRE_INTS] == 2) & (head[:, _SER_VER] == _SERIAL_VERSION) & (head[:, _FAMILY] == _HLL_FAMILY)
             & (head[:, _LG_K] >= 4) & (head[:, _LG_K] <= 21) & ((head[:, _FLAGS] & (_EMPTY | _COMPACT)) == _COMPACT)
             & ((head[:, _MODE] & 3) == _LIST) & ((head[:, _MODE] >> 2) <= _HLL_8)
             & (head[:, _COUNT_OR_CUR_MIN] == 1) & (coupon != 0))
    return pa.array(coupon, pa.int64(), mask=~fits)


class _Images:
    """The preambles of every image of a binary array, read column-wise (one 8-byte load per image)."""

    def __init__(self, blobs: pa.Array) -> None:
        self.data, offs = buffers(blobs)
        self.start, self.length = offs[:-1], np.diff(offs)
        self.readable = self.length >= 8
        self.u32 = unaligned(self.data, "<u4")
        self.head = unaligned(self.data, "<u8")[np.where(self.readable, self.start, 0)]
        self.preamble = self.head.view(np.uint8).reshape(-1, 8)
        self.mode = self.preamble[:, _MODE] & 3
        self.lg_k = self.preamble[:, _LG_K].astype(np.int64)

    def field(self, byte: int) -> np.ndarray:
        return self.preamble[:, byte]


def _coupon_counts(img: _Images) -> tuple[np.ndarray, np.ndarray]:
    """How many coupon slots each list/set image holds, and where they start (0 for other images)."""
    compact = (img.field(_FLAGS) & _COMPACT) != 0
    is_set = img.mode == _SET
    start = img.start + np.where(is_set, _SET_START, _LIST_START)
    count = img.field(_COUNT_OR_CUR_MIN).astype(np.int64)
    sets = np.flatnonzero(is_set & (img.length >= _SET_START))
    count[sets] = img.u32[img.start[sets] + 8]
    loose = np.flatnonzero(~compact)
    count[loose] = np.int64(1) << np.minimum(img.field(_LG_ARR)[loose], 30).astype(np.int64)
    return count, start


def _hll_registers(img: _Images, rows: np.ndarray, lg_k: int, code: int) -> np.ndarray:
    """The register arrays (len(rows) × 2**lg_k) of HLL-mode images of one ``lgK`` and type."""
    k = 1 << lg_k
    base = img.start[rows][:, None] + _HLL_START
    if code == _HLL_8:
        return img.data[base + np.arange(k)]
    if code == _HLL_6:
        bit = 6 * np.arange(k)
        pos = base + (bit >> 3)
        pair = img.data[pos].astype(np.uint16) | (img.data[pos + 1].astype(np.uint16) << 8)
        return ((pair >> (bit & 7).astype(np.uint16)) & 63).astype(np.uint8)
    packed = img.data[base + (np.arange(k) >> 1)]
    nibble = np.where(np.arange(k) & 1, packed >> 4, packed & 15)
    regs = (nibble + img.field(_COUNT_OR_CUR_MIN)[rows][:, None]).astype(np.uint8)
    exceptions = nibble == _AUX_TOKEN
    if exceptions.any():
        aux_start = img.start[rows] + _HLL_START + k // 2
        n = np.where(exceptions.any(axis=1), _aux_slots(img, rows, k), 0)
        pos, run = spans(aux_start, n, 4)
        entry = img.u32[pos]
        keep = entry != 0
        entry, run = entry[keep], run[keep]
        regs[run, (entry & np.uint32(k - 1)).astype(np.int64)] = (entry >> np.uint32(_SLOT_BITS)).astype(np.uint8)
    return regs


def _aux_slots(img: _Images, rows: np.ndarray, k: int) -> np.ndarray:
    """How many aux-table entries follow the 4-bit registers of HLL_4 images: the exceptions themselves
    in a compact image, the whole hash table (empty slots 0) in an updatable one."""
    compact = (img.field(_FLAGS)[rows] & _COMPACT) != 0
    aux_count = img.u32[img.start[rows] + _AUX_COUNT].astype(np.int64)
    return np.where(compact, aux_count, np.maximum(img.length[rows] - _HLL_START - k // 2, 0) // 4)


def _expected_length(img: _Images, count: np.ndarray) -> np.ndarray:
    """The byte length each image must have to be read here (−1: an image this module does not read)."""
    expected = np.where(img.mode == _SET, _SET_START, _LIST_START) + 4 * count
    hll = np.flatnonzero(img.mode == _HLL)
    if len(hll):
        k = np.int64(1) << np.minimum(img.lg_k[hll], 30)
        code = img.field(_MODE)[hll] >> 2
        expected[hll] = _HLL_START + np.select([code == _HLL_8, code == _HLL_6], [k, (6 * k) // 8 + 1], k // 2)
        for lg_k in np.unique(img.lg_k[hll[code == _HLL_4]]):  # HLL_4: the aux table after the registers
            rows = hll[(code == _HLL_4) & (img.lg_k[hll] == lg_k)]
            expected[rows] += 4 * _aux_slots(img, rows, 1 << int(min(lg_k, 30)))
    mode_byte = img.field(_MODE)
    ok = (img.readable & (((img.head >> np.uint64(8)) & np.uint64(0xFFFF)) == (_HLL_FAMILY << 8 | _SERIAL_VERSION))
          & (mode_byte & 3 != 3) & (mode_byte < 12) & ((img.field(_LG_K) - np.uint8(4)) <= 17))
    return np.where(ok, expected, -1)


_INVERSE_POWERS = np.ldexp(1.0, -np.arange(64))  # 2**-v for every register value v


def _hll_image(registers: np.ndarray, lg_k: int) -> bytes:
    """An out-of-order HLL_8 image of ``registers`` (the library reads its estimate from them): with the
    sums of 2**-v below and from 32 (kxq0, kxq1) and the count of zeros a sketch keeps beside them."""
    per_value = np.bincount(registers, minlength=64)
    head = struct.pack("<8B", 10, _SERIAL_VERSION, _HLL_FAMILY, lg_k, 0, _COMPACT | _OUT_OF_ORDER, 0,
                       _HLL | (_HLL_8 << 2))
    fields = struct.pack("<dddii", 0.0, float(per_value[:32] @ _INVERSE_POWERS[:32]),
                         float(per_value[32:] @ _INVERSE_POWERS[32:]), int(per_value[0]), 0)
    return head + fields + registers.tobytes()


def _coupon_image(coupons: np.ndarray, lg_k: int) -> bytes:
    """A list- or set-mode image holding ``coupons`` (distinct, at most :func:`coupon_capacity`)."""
    n = len(coupons)
    if n < 8:
        head = struct.pack("<8B", 2, _SERIAL_VERSION, _HLL_FAMILY, lg_k, 3, _COMPACT, n, _LIST | (_HLL_8 << 2))
        return head + coupons.astype("<u4").tobytes()
    lg_arr = max(5, int(np.ceil(np.log2(n * 4 / 3 + 1))))
    head = struct.pack("<8Bi", 3, _SERIAL_VERSION, _HLL_FAMILY, lg_k, lg_arr, _COMPACT, 0, _SET | (_HLL_8 << 2), n)
    return head + coupons.astype("<u4").tobytes()


def _read_coupons(img: _Images, count: np.ndarray, start: np.ndarray, usable: np.ndarray,
                  group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every coupon of the usable list/set images, and its group."""
    start, count, owner = where_all(usable & (img.mode != _HLL), start, count, group)
    pos, run = spans(start, count, 4)
    coupons = img.u32[pos]
    coupon_group = owner if (count == 1).all() else owner[run]  # one coupon an image: runs are the images
    return where_all(coupons != 0, coupons, coupon_group)  # updatable images keep 0 as empty


def _merge_coupons(coupons: np.ndarray, coupon_group: np.ndarray, registers: np.ndarray) -> None:
    """Coupons (uint32) into their groups' registers: each slot keeps its largest value."""
    if not len(coupons):
        return
    k = registers.shape[1]
    slot = coupons & np.uint32(k - 1)
    if coupons.flags.c_contiguous:  # the top 6 bits: byte 3 of each (one pass)
        value = coupons.view(np.uint8)[3::4] >> np.uint8(_SLOT_BITS - 24)
    else:
        value = (coupons >> np.uint32(_SLOT_BITS)).astype(np.uint8)
    np.maximum.at(registers.reshape(-1), slot if len(registers) == 1 else coupon_group * k + slot, value)


def _merge_registers(img: _Images, hll: np.ndarray, group: np.ndarray, registers: np.ndarray) -> None:
    """The register arrays of the HLL-mode images into their groups' registers (a larger ``lgK`` folds
    down: slot ``i`` goes to ``i mod k``, as the library's union does)."""
    k = registers.shape[1]
    code = img.field(_MODE) >> 2
    for src_lg_k in np.unique(img.lg_k[hll]):
        for c in (_HLL_4, _HLL_6, _HLL_8):
            rows = np.flatnonzero(hll & (img.lg_k == src_lg_k) & (code == c))
            if len(rows):
                regs = _hll_registers(img, rows, int(src_lg_k), c)
                np.maximum.at(registers, group[rows], regs.reshape(len(rows), -1, k).max(axis=1))


def _distinct_coupons(coupons: np.ndarray, coupon_group: np.ndarray, groups: np.ndarray) -> dict[int, np.ndarray]:
    """The distinct coupons of each of ``groups`` (a boolean mask over all groups)."""
    if not groups.any():
        return {}
    mine = where_all(groups[coupon_group], coupon_group.astype(np.uint64), coupons)
    keys = np.unique((mine[0] << np.uint64(32)) | mine[1])
    bounds = np.searchsorted((keys >> np.uint64(32)).astype(np.int64), np.arange(len(groups) + 1))
    return {int(g): (keys[bounds[g]:bounds[g + 1]] & np.uint64(0xFFFFFFFF)).astype(np.uint32)
            for g in np.flatnonzero(groups)}


def merge_hll_lists(lists: pa.Array, lg_k: int, tgt_hll_type: str,
                    one_at_a_time: Callable[[list[Any]], bytes],
                    singles: pa.Array | None = None) -> list[bytes | None]:
    """Each list of serialized HLL sketches merged into one (``tgt_hll_type``, at most ``lg_k``).

    A null list merges nothing (an empty sketch); null sketches are skipped. ``one_at_a_time`` merges
    a group this module cannot read (see the module notes): its exception leaves that group None.
    ``singles``, when given, holds for each group more sketches as their coupons (:func:`single_coupons`
    of one-coupon images: the group's sketches are its images and these).
    """
    lists = one_array(lists)
    singles = None if singles is None else one_array(singles)
    n_groups = len(lists)
    step = max(1, REGISTER_BUDGET >> lg_k)
    if n_groups > step:  # the groups' registers at most REGISTER_BUDGET bytes at a time
        return [merged for first in range(0, n_groups, step)
                for merged in merge_hll_lists(lists.slice(first, step), lg_k, tgt_hll_type, one_at_a_time,
                                              None if singles is None else singles.slice(first, step))]
    blobs, group, _ = flatten(lists)
    registers = np.zeros((n_groups, 1 << lg_k), np.uint8)
    has_registers, unreadable = np.zeros(n_groups, bool), np.zeros(n_groups, bool)
    one_layout = _one_list_layout(blobs)
    if one_layout is not None:
        coupons, per_image = one_layout
        coupon_group = group if per_image == 1 else np.repeat(group, per_image)
    else:
        img = _Images(blobs)
        count, start = _coupon_counts(img)
        readable = _expected_length(img, count) == img.length
        readable &= ~((img.mode == _HLL) & (img.lg_k < lg_k))  # the union would shrink to that lgK: the library's
        usable = readable & ((img.field(_FLAGS) & _EMPTY) == 0)
        unreadable[group[~readable]] = True
        coupons, coupon_group = _read_coupons(img, count, start, usable, group)
        hll = usable & (img.mode == _HLL)
        if hll.any():
            has_registers[group[hll]] = True
            _merge_registers(img, hll, group, registers)
    _merge_coupons(coupons, coupon_group, registers)
    parts = [(coupons, coupon_group)]
    if singles is not None:
        values, owner, _ = flatten(singles)
        if len(values):  # the low 32 bits of each int64 (little-endian): a view, no copy
            single = np.asarray(values, np.int64).view(np.uint32)[::2]
            _merge_coupons(single, owner, registers)
            parts.append((single, owner))
    capacity = coupon_capacity(lg_k)
    small = ~has_registers & ~unreadable & (np.count_nonzero(registers, axis=1) <= capacity)
    distinct = _distinct_coupons(*(p[0] if len(parts) == 1 else np.concatenate(p) for p in zip(*parts, strict=True)),
                                 small) if small.any() else {}

    target = getattr(ds.tgt_hll_type, tgt_hll_type)
    out: list[bytes | None] = []
    for g in range(n_groups):
        if unreadable[g]:
            out.append(merged_one_at_a_time(one_at_a_time, lists[g].as_py()))
            continue
        group_coupons = distinct.get(g)
        if group_coupons is not None and len(group_coupons) <= capacity:
            image = _coupon_image(group_coupons, lg_k)
        else:
            image = _hll_image(registers[g], lg_k)
        union = ds.hll_union(lg_k)
        if group_coupons is None or len(group_coupons):  # a group without sketches: the empty union
            union.update(ds.hll_sketch.deserialize(image))
        out.append(registers_only(bytes(union.get_result(target).serialize_compact())))
    return out
