"""radstack/sketches/: sketches whose estimates do not depend on the order rows arrive in."""

from __future__ import annotations

import random

import datasketches as ds
import pytest

from radstack.sketches import aggregate, estimate, parse_params

HLL = parse_params("HLLSketchBuild", {"lgK": 12, "tgtHllType": "HLL_4"})


def _small_sketches(n: int) -> list[bytes]:
    """Per-row sketches of three values each, as a rolled-up segment stores them (list mode)."""
    return [aggregate(HLL, [f"u{j}" for j in range(i, min(i + 3, n))], sketches=False) for i in range(0, n, 3)]


def test_hll_merge_estimate_is_the_same_in_any_order() -> None:
    rng = random.Random(7)
    for n in (40, 1200, 20000):
        parts = _small_sketches(n)
        estimates = set()
        for _ in range(5):
            rng.shuffle(parts)
            estimates.add(estimate(aggregate(HLL, parts, sketches=True)))
        assert len(estimates) == 1, (n, estimates)
        (est,) = estimates
        assert abs(est - n) < 0.05 * n


def test_hll_merge_equals_the_sketch_built_from_all_values() -> None:
    values = [f"u{j}" for j in range(5000)]
    whole = estimate(aggregate(HLL, values, sketches=False))
    rng = random.Random(3)
    rng.shuffle(values)
    assert estimate(aggregate(HLL, values, sketches=False)) == whole
    assert estimate(aggregate(HLL, _small_sketches(5000), sketches=True)) == whole


def test_small_hll_sketches_stay_exact_and_readable() -> None:
    data = aggregate(HLL, ["a", "b", "a", None], sketches=False)
    sketch = ds.hll_sketch.deserialize(data)
    assert sketch.get_estimate() == estimate(data) == pytest.approx(2.0)
