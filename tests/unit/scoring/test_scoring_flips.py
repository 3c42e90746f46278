"""Flips between BaseGen and NovelGen carry their uncertainty (issue 22): each side's paired
difference, and a flip is significant only when both sides are, in opposite directions."""

from __future__ import annotations

import numpy as np
import pytest

from submission_api.scoring.flips import compute_flip_difference
from submission_api.scoring.paired import compute_stratified_difference


def side(gap: float, rng: np.random.Generator, n: int = 80, noise: float = 0.05):
    """(a, b, strata): two entries' task scores on one side, a − b = gap on average."""
    b = rng.uniform(0.3, 0.7, n)
    return b + gap + rng.normal(0, noise, n), b, np.array(["x", "y"] * (n // 2))


def test_a_real_flip_is_significant_and_each_side_has_its_paired_interval():
    rng = np.random.default_rng(0)
    base, novel = side(0.1, rng), side(-0.1, rng)
    flip = compute_flip_difference(base, novel)
    assert flip.significant
    direct = compute_stratified_difference(base[0] - base[1], base[2])
    assert (flip.base.low, flip.base.high) == pytest.approx((direct.low, direct.high))
    assert flip.base.low > 0 > flip.novel.high
    answer = flip.to_dict()
    assert answer["significant"] is True and answer["novel"]["n"] == 80


def test_a_flip_within_noise_is_not_significant():
    rng = np.random.default_rng(1)
    flip = compute_flip_difference(side(0.002, rng), side(-0.002, rng))
    assert flip.base.low < 0 < flip.base.high and not flip.significant
    # one side clear, the other within noise: still not a significant flip
    one_sided = compute_flip_difference(side(0.1, rng), side(-0.002, rng))
    assert one_sided.base.significant and not one_sided.significant


def test_two_significant_differences_of_the_same_sign_are_no_flip():
    rng = np.random.default_rng(2)
    assert not compute_flip_difference(side(0.1, rng), side(0.1, rng)).significant
