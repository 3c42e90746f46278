"""Meta-Dataset variable-way variable-shot episodes (Triantafillou et al. 2020)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from submission_api.sampling import (
    check_episode,
    compute_shared_pools,
    make_rng,
    sample_disjoint_pools,
    sample_meta_dataset_episode,
)
from submission_api.sampling import meta_dataset as md


def test_constants_are_those_of_meta_dataset():
    assert (md.MD_MIN_WAYS, md.MD_MAX_WAYS_UPPER_BOUND, md.MD_MAX_NUM_QUERY) == (5, 50, 10)
    assert (md.MD_MAX_SUPPORT_SET_SIZE, md.MD_MAX_SUPPORT_SIZE_CONTRIB_PER_CLASS) == (500, 100)
    assert math.isclose(md.MD_MIN_LOG_WEIGHT, math.log(0.5))
    assert math.isclose(md.MD_MAX_LOG_WEIGHT, math.log(2.0))


def test_shared_pool_episodes_satisfy_every_meta_dataset_bound(make_dataset):
    sizes = [6, 9, 14, 22, 40, 80, 150, 300] * 8  # 64 classes, imbalanced
    ds = make_dataset("d", sizes)
    pools = compute_shared_pools(ds.labels, len(sizes))
    rng = make_rng(11)
    ways = []
    for _ in range(60):
        ep = sample_meta_dataset_episode(pools, rng, "d")
        check_episode(ep)
        n_c = np.array(sizes)[ep.class_ids]
        q = min(10, int((n_c // 2).min()))
        assert (np.bincount(ep.query_labels, minlength=ep.n_ways) == q).all()
        shots = np.bincount(ep.support_labels, minlength=ep.n_ways)
        assert (shots >= 1).all() and (shots <= n_c - q).all() and shots.sum() <= 500
        assert 5 <= ep.n_ways <= 50
        ways.append(ep.n_ways)
    assert min(ways) < 15 and max(ways) > 35


def test_support_is_class_imbalanced(make_dataset):
    ds = make_dataset("d", [300] * 10)
    pools = compute_shared_pools(ds.labels, 10)
    rng = make_rng(12)
    spreads = []
    for _ in range(20):
        shots = np.bincount(sample_meta_dataset_episode(pools, rng, "d").support_labels)
        spreads.append(shots.max() / shots.min())
    assert max(spreads) > 1.5


def test_shots_formula_caps_and_sums(make_dataset):
    rng = make_rng(13)
    for _ in range(200):
        sizes = rng.integers(2, 400, size=int(rng.integers(5, 51))).astype(float)
        remaining = np.maximum(sizes.astype(np.int64) - 10, 1)
        shots = md.sample_md_shots(sizes, remaining, rng)
        assert (shots >= 1).all() and (shots <= remaining).all() and shots.sum() <= 500


def test_disjoint_pools_use_pool_sizes(make_dataset):
    sizes = [8, 12, 40, 40, 40, 40, 40]
    ds = make_dataset("d", sizes)
    rng = make_rng(14)
    pools = sample_disjoint_pools(ds.labels, len(sizes), 10, rng)
    for _ in range(40):
        ep = sample_meta_dataset_episode(pools, rng, "d")
        q = min(10, min(len(pools.query[c]) for c in ep.class_ids))
        assert (np.bincount(ep.query_labels) == q).all()
        for j, c in enumerate(ep.class_ids):
            assert set(ep.support_idx[ep.support_labels == j]) <= set(pools.support[c].tolist())
            assert set(ep.query_idx[ep.query_labels == j]) <= set(pools.query[c].tolist())


def test_super_category_choice_stays_within_one_super_category(make_dataset):
    supers = [0] * 8 + [1] * 6 + [2] * 3  # super-category 2 is too small for 5 ways
    ds = make_dataset("d", [20] * len(supers), super_categories=supers)
    pools = compute_shared_pools(ds.labels, len(supers))
    rng = make_rng(15)
    chosen = set()
    for _ in range(40):
        ep = sample_meta_dataset_episode(pools, rng, "d", ds.super_categories)
        groups = set(ds.super_categories[ep.class_ids].tolist())
        assert len(groups) == 1
        chosen |= groups
        assert ep.n_ways <= (8 if groups == {0} else 6)
    assert chosen == {0, 1}


def test_without_a_large_enough_super_category_classes_come_from_all(make_dataset):
    supers = [0, 0, 1, 1, 2, 2, 3, 3]
    ds = make_dataset("d", [20] * 8, super_categories=supers)
    pools = compute_shared_pools(ds.labels, 8)
    ep = sample_meta_dataset_episode(pools, make_rng(16), "d", ds.super_categories)
    assert len(set(ds.super_categories[ep.class_ids].tolist())) > 1


def test_too_few_classes_is_a_clear_error(make_dataset):
    ds = make_dataset("small", [20, 20, 20, 1])
    with pytest.raises(ValueError, match="'small' has 3 classes .* expected at least 5"):
        sample_meta_dataset_episode(compute_shared_pools(ds.labels, 4), make_rng(0), "small")
