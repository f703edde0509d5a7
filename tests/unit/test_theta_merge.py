"""radstack/sketches/theta_merge.py: the vectorised merge answers what the one-sketch-at-a-time union
answers, byte for byte: single-item, exact and estimating images, empty ones, repeats, other sizes."""

from __future__ import annotations

import random

import datasketches as ds
import pyarrow as pa
import pytest

from radstack.sketches import SketchParams, aggregate, estimate
from radstack.sketches.theta_merge import merge_theta_lists, single_hashes


def _sketch(values: range | list[int], lg_k: int = 12) -> bytes:
    s = ds.update_theta_sketch(lg_k)
    for v in values:
        s.update(f"v{v}")
    return bytes(s.compact().serialize())


def _one_at_a_time(lg_k: int):
    params = SketchParams("thetaSketch", lg_k=lg_k)
    return lambda items: aggregate(params, items, sketches=True)


def _check(groups: list[list[bytes | None] | None], lg_k: int = 12) -> None:
    fell_back: list[object] = []

    def fallback(items: list[bytes]) -> bytes:
        fell_back.append(items)
        return slow(items)

    slow = _one_at_a_time(lg_k)
    fast = merge_theta_lists(pa.array(groups, pa.list_(pa.binary())), lg_k, fallback)
    assert not fell_back, "every group here is read by the vectorised merge"
    images: list[list[bytes | None] | None] = []
    singles: list[list[int] | None] = []
    for items in groups:  # the same merge with every single-hash image handed over as its hash
        hashes = single_hashes(pa.array(items or [], pa.binary())).to_pylist()
        images.append(None if items is None else [b for b, h in zip(items, hashes, strict=True) if h is None])
        singles.append(None if items is None else [h for h in hashes if h is not None])
    assert merge_theta_lists(pa.array(images, pa.list_(pa.binary())), lg_k, fallback,
                             pa.array(singles, pa.list_(pa.int64()))) == fast
    for got, items in zip(fast, groups, strict=True):
        want = slow([b for b in items or [] if b is not None])
        assert got == want
        assert estimate(got) == estimate(want)


def test_per_row_sketches_of_one_value_with_repeats() -> None:
    rng = random.Random(3)
    groups: list[list[bytes | None] | None] = [
        [_sketch([rng.randrange(size // 3 + 1)]) for _ in range(size)] for size in (0, 1, 5, 4096, 4200, 13_000, 40_000)]
    groups.append(None)
    _check(groups)


def test_exact_and_estimating_images_of_several_sizes() -> None:
    sources = [_sketch(range(i * 1000, i * 1000 + n), lg_k) for i, (n, lg_k) in
               enumerate([(0, 12), (1, 12), (3, 12), (3000, 12), (9000, 12), (50_000, 12), (20_000, 10), (70_000, 14)])]
    groups: list[list[bytes | None] | None] = [[s] for s in sources]
    groups += [sources, sources[:4], [sources[4], sources[4], None, sources[5]], [sources[0], sources[0]]]
    for lg_k in (10, 12, 14):
        _check(groups, lg_k)


def test_an_unreadable_sketch_fails_its_group_only() -> None:
    good = _sketch(range(10))
    groups = [[good], [good, b"\x01\x03"], [good, good[:-3]], [good, b"x" * 24]]
    out = merge_theta_lists(pa.array(groups, pa.list_(pa.binary())), 12, _one_at_a_time(12))
    assert out[0] is not None and estimate(out[0]) == pytest.approx(10)
    assert out[1:] == [None, None, None]


def test_single_hashes_are_read_from_single_hash_images_only() -> None:
    one = _sketch([1])
    hashes = single_hashes(pa.array([one, _sketch([1, 2]), _sketch([]), None, b"\x01\x03", _sketch(range(9000))],
                                    pa.binary())).to_pylist()
    assert hashes[0] == int.from_bytes(one[8:16], "little") > 0
    assert hashes[1:] == [None] * 5
