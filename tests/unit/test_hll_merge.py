"""radstack/sketches/hll_merge.py: the vectorised merge answers what the one-sketch-at-a-time union
answers, on every image layout (list, set, HLL_4 with and without exceptions, HLL_6, HLL_8; compact and
updatable) and in both result modes (coupons kept, registers)."""

from __future__ import annotations

import random

import datasketches as ds
import pyarrow as pa
import pytest

from radstack.sketches import SketchParams, aggregate, estimate
from radstack.sketches.hll_merge import coupon_capacity, merge_hll_lists, single_coupons

TYPES = ("HLL_4", "HLL_6", "HLL_8")


def _sketch(values: range | list[str], lg_k: int = 12, tgt: str = "HLL_4", compact: bool = True) -> bytes:
    s = ds.hll_sketch(lg_k, getattr(ds.tgt_hll_type, tgt))
    for v in values:
        s.update(f"v{v}")
    return bytes(s.serialize_compact() if compact else s.serialize_updatable())


def _one_at_a_time(lg_k: int, tgt: str):
    params = SketchParams("HLLSketch", lg_k=lg_k, tgt_hll_type=tgt)
    return lambda items: aggregate(params, items, sketches=True)


def _check(groups: list[list[bytes | None] | None], lg_k: int = 12, tgt: str = "HLL_4",
           one_at_a_time: int = 0) -> list[bytes | None]:
    """Both merges of each group: equal estimates, equal modes, equal bytes for every register image
    but the HIP sum, which an out-of-order sketch does not read."""
    fell_back: list[object] = []

    def fallback(items: list[bytes]) -> bytes:
        fell_back.append(items)
        return slow(items)

    slow = _one_at_a_time(lg_k, tgt)
    fast = merge_hll_lists(pa.array(groups, pa.list_(pa.binary())), lg_k, tgt, fallback)
    assert len(fell_back) == one_at_a_time, "the groups the vectorised merge reads"
    assert _split_by_singles(groups, lg_k, tgt, fallback) == fast
    for got, items in zip(fast, groups, strict=True):
        want = slow([b for b in items or [] if b is not None])
        assert got is not None
        assert got[7] & 3 == want[7] & 3, "the same mode (list, set or HLL)"
        assert estimate(got) == estimate(want)
        if want[7] & 3 == 2:  # registers, kxq sums, zeros, aux: the same bytes (not the unused HIP sum)
            assert got[:8] + got[16:] == want[:8] + want[16:]
    return fast


def _split_by_singles(groups: list[list[bytes | None] | None], lg_k: int, tgt: str,
                      fallback: object) -> list[bytes | None]:
    """The same merge with every one-coupon image handed over as its coupon (the broker's integer
    column beside a sketch column) and only the others as images."""
    images: list[list[bytes | None] | None] = []
    singles: list[list[int] | None] = []
    for items in groups:
        coupons = single_coupons(pa.array(items or [], pa.binary())).to_pylist()
        images.append(None if items is None else [b for b, c in zip(items, coupons, strict=True) if c is None])
        singles.append(None if items is None else [c for c in coupons if c is not None])
    return merge_hll_lists(pa.array(images, pa.list_(pa.binary())), lg_k, tgt, fallback,  # type: ignore[arg-type]
                           pa.array(singles, pa.list_(pa.int64())))


def test_single_coupons_are_read_from_one_coupon_lists_only() -> None:
    one, two, empty = _sketch([1]), _sketch([1, 2]), _sketch([])
    coupons = single_coupons(pa.array([one, two, empty, None, _sketch([1], 12, "HLL_8"), _sketch([1], compact=False),
                                       b"\x02\x01\x07", _sketch(range(5000))], pa.binary())).to_pylist()
    assert coupons[0] == coupons[4] == int.from_bytes(one[8:12], "little") != 0  # the type does not matter
    assert coupons[1:4] == [None, None, None] and coupons[5:] == [None, None, None]


def test_coupon_capacity_is_where_a_union_turns_to_registers() -> None:
    for lg_k in (4, 7, 8, 10, 12):
        cap = coupon_capacity(lg_k)
        union = ds.hll_union(lg_k)
        for i in range(cap):
            union.update(ds.hll_sketch.deserialize(_sketch([i], lg_k)))
        assert union.get_result().serialize_compact()[7] & 3 != 2
        union.update(ds.hll_sketch.deserialize(_sketch([cap + 10_000], lg_k)))
        assert union.get_result().serialize_compact()[7] & 3 == 2


def test_per_row_sketches_of_one_value_many_groups() -> None:
    rng = random.Random(5)
    groups: list[list[bytes | None] | None] = []
    for size in (0, 1, 3, 7, 8, 50, 383, 384, 385, 390, 2000, 20_000):
        groups.append([_sketch([rng.randrange(size * 2 + 1)]) for _ in range(size)])
    groups.append(None)
    _check(groups)


@pytest.mark.parametrize("tgt", TYPES)
@pytest.mark.parametrize("compact", [True, False])
def test_every_layout_of_every_mode(tgt: str, compact: bool) -> None:
    sizes = (0, 3, 40, 300, 5000, 60_000)
    sources = [_sketch(range(i * 997, i * 997 + n), 12, tgt, compact) for i, n in enumerate(sizes)]
    groups: list[list[bytes | None] | None] = [[s] for s in sources]
    groups.append(sources)
    groups.append([sources[1], None, sources[2]])
    for out_tgt in TYPES:
        _check(groups, 12, out_tgt)


def test_hll_4_exceptions_in_the_aux_table() -> None:
    # lgK 14 over 300,000 values: some registers end 15 or more above the lowest (14 such, measured)
    sources = [_sketch(range(i * 300_000, (i + 1) * 300_000), 14, "HLL_4", compact) for i, compact in
               enumerate((True, False))]
    assert any(int.from_bytes(s[36:40], "little") for s in sources), "an aux table to read"
    for tgt in TYPES:
        _check([[s] for s in sources] + [sources], 14, tgt)


def test_a_larger_lg_k_folds_down_and_a_smaller_one_goes_to_the_library() -> None:
    big, small = _sketch(range(30_000), 14, "HLL_8"), _sketch(range(20_000, 50_000), 10, "HLL_6")
    _check([[big], [big, _sketch([1, 2, 3], 14)], [small], [big, small]], 12, "HLL_4", one_at_a_time=2)


def test_an_unreadable_sketch_fails_its_group_only() -> None:
    good = _sketch(range(10))
    groups = [[good], [good, b"\x02\x01\x07"], [good, b"not a sketch at all"], [good[:-2]]]
    out = merge_hll_lists(pa.array(groups, pa.list_(pa.binary())), 12, "HLL_4", _one_at_a_time(12, "HLL_4"))
    assert out[0] is not None and estimate(out[0]) == pytest.approx(10)
    assert out[1:] == [None, None, None]


def test_per_row_sketches_of_three_values_read_as_one_block_and_one_by_one() -> None:
    rng = random.Random(9)
    triples = [_sketch(rng.sample(range(9000), 3)) for _ in range(6000)]
    assert {len(t) for t in triples} == {20}, "compact lists of three coupons, one layout"
    blocks = [triples[i: i + 600] for i in range(0, 6000, 600)]
    _check(blocks)
    _check(blocks + [[triples[0], _sketch([])]])  # an empty sketch among them: the general reader


def test_many_groups_are_merged_a_slice_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    from radstack.sketches import hll_merge

    monkeypatch.setattr(hll_merge, "REGISTER_BUDGET", 3 << 12)  # three groups of lgK 12 at a time
    rng = random.Random(11)
    groups: list[list[bytes | None] | None] = [
        [_sketch([rng.randrange(4000) for _ in range(3)]) for _ in range(rng.randrange(0, 900))] for _ in range(10)]
    _check(groups)


def test_coupons_go_to_their_own_group_after_an_image_without_any() -> None:
    # a compact list image holding no coupon (not flagged empty) before a two-coupon image: the coupons'
    # runs no longer line up with the images, and each coupon must still reach its own group
    no_coupons = bytes([2, 1, 7, 12, 3, 8, 0, 0])
    groups: list[list[bytes | None] | None] = [[no_coupons], [_sketch([1, 2])], [_sketch([3])]]
    out = _check(groups)
    assert [estimate(b) for b in out] == pytest.approx([0.0, 2.0, 1.0])
