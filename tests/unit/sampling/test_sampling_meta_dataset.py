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


def _md_pools(ds, n_classes, rng):
    return sample_disjoint_pools(ds.labels, n_classes, 10, rng,
                                 query_pool_size=md.compute_md_query_pool_size)


def reference_episode(sizes: np.ndarray, rng: np.random.Generator, min_ways: int = 5):
    """meta_dataset/data/sampling.py, flat class sampling, transcribed line by line (a NumPy
    Generator in place of its RandomState): ways, classes, q, beta, S, log-weights, shots."""
    num_ways = rng.integers(min_ways, min(50, len(sizes)) + 1)
    class_ids = rng.choice(np.arange(len(sizes)), num_ways, replace=False)
    images_per_class = sizes[class_ids]
    num_query = np.minimum(10, (images_per_class // 2).min())
    num_remaining = images_per_class - num_query
    beta = rng.uniform()
    support_set_size = np.minimum(np.floor(beta * np.minimum(100, num_remaining) + 1).sum(), 500)
    unnormalized = images_per_class * np.exp(
        rng.uniform(np.log(0.5), np.log(2.0), size=images_per_class.shape))
    proportions = unnormalized / unnormalized.sum()
    desired = np.floor(proportions * (support_set_size - num_ways)).astype("int32") + 1
    return class_ids, int(num_query), np.minimum(desired, num_remaining)


@pytest.mark.parametrize("disjoint", [False, True])
def test_episodes_follow_meta_dataset_formulas_draw_for_draw(make_dataset, disjoint):
    sizes = np.array([15, 40, 40, 40, 40, 40, 22, 300, 9, 60])
    ds = make_dataset("d", sizes.tolist())
    pools = (_md_pools(ds, len(sizes), make_rng(1)) if disjoint
             else compute_shared_pools(ds.labels, len(sizes)))
    for seed in range(60):
        ep = sample_meta_dataset_episode(pools, make_rng(seed), "d")
        class_ids, q, shots = reference_episode(sizes, make_rng(seed))
        assert ep.class_ids.tolist() == class_ids.tolist()
        assert (np.bincount(ep.query_labels, minlength=ep.n_ways) == q).all()
        got = np.bincount(ep.support_labels, minlength=ep.n_ways)
        if disjoint:  # the one extra cap: what the class's support pool holds
            shots = np.minimum(shots, [len(pools.support[c]) for c in class_ids])
        assert got.tolist() == shots.tolist()


def test_a_15_image_class_gets_7_queries_not_10(make_dataset):
    sizes = [15] + [40] * 4
    ds = make_dataset("d", sizes)
    pools = _md_pools(ds, 5, make_rng(2))
    assert [len(p) for p in pools.query] == [7, 10, 10, 10, 10]
    assert [len(p) for p in pools.support] == [8, 30, 30, 30, 30]
    ep = sample_meta_dataset_episode(pools, make_rng(3), "d")
    assert (np.bincount(ep.query_labels) == 7).all()


def test_a_40_image_class_can_give_30_shots_never_more(make_dataset):
    ds = make_dataset("d", [40] * 5)
    pools = _md_pools(ds, 5, make_rng(4))
    rng = make_rng(5)
    most = max(np.bincount(sample_meta_dataset_episode(pools, rng, "d").support_labels).max()
               for _ in range(200))
    assert most == 30  # n_c - q with q = 10; pools sized n/2 capped it at 20


@pytest.mark.parametrize(("n", "pool"), [(2, 1), (3, 1), (15, 7), (20, 10), (40, 10), (600, 10)])
def test_query_pool_is_the_most_queries_an_episode_can_ask(n, pool):
    assert md.compute_md_query_pool_size(n) == pool


def test_super_category_choice_stays_within_one_super_category(make_dataset):
    supers = [0] * 8 + [1] * 6 + [2] * 5
    ds = make_dataset("d", [20] * len(supers), super_categories=supers)
    pools = compute_shared_pools(ds.labels, len(supers))
    rng = make_rng(15)
    chosen = set()
    for _ in range(40):
        ep = sample_meta_dataset_episode(pools, rng, "d", ds.super_categories)
        groups = set(ds.super_categories[ep.class_ids].tolist())
        assert len(groups) == 1
        chosen |= groups
        assert ep.n_ways <= {0: 8, 1: 6, 2: 5}[groups.pop()]
    assert chosen == {0, 1, 2}


def test_a_super_category_smaller_than_5_classes_is_refused_not_skipped(make_dataset):
    """sampling.py's constructor: 'Superclass: %d has num_classes=%d < min_ways=%d.'"""
    supers = [0] * 8 + [1] * 6 + [2] * 3
    ds = make_dataset("d", [20] * len(supers), super_categories=supers)
    pools = compute_shared_pools(ds.labels, len(supers))
    with pytest.raises(ValueError, match=r"Super-categories \[2\] have fewer than 5 classes"):
        sample_meta_dataset_episode(pools, make_rng(16), "d", ds.super_categories)


def reference_bilevel_episode(supers: np.ndarray, sizes: np.ndarray, rng: np.random.Generator):
    """meta_dataset/data/sampling.py, `sample_class_ids` on its bilevel branch then
    `sample_episode_description`, transcribed line by line (a NumPy Generator in place of its
    RandomState), `ignore_hierarchy_probability` at its default 0."""
    prob = [1.0, 0.0]
    assert rng.choice([True, False], p=prob)  # use_bilevel_hierarchy and the coin
    superclass_set = np.unique(supers)
    episode_superclass = rng.choice(superclass_set, 1)[0]
    members = np.flatnonzero(supers == episode_superclass)  # its classes, in id order
    num_superclass_classes = len(members)
    num_ways = rng.integers(low=5, high=min(50, num_superclass_classes) + 1)
    episode_subclass_ids = rng.choice(num_superclass_classes, num_ways, replace=False)
    class_ids = members[episode_subclass_ids]
    images_per_class = sizes[class_ids]
    num_query = np.minimum(10, (images_per_class // 2).min())
    num_remaining = images_per_class - num_query
    beta = rng.uniform()
    support_set_size = np.minimum(np.floor(beta * np.minimum(100, num_remaining) + 1).sum(), 500)
    unnormalized = images_per_class * np.exp(
        rng.uniform(np.log(0.5), np.log(2.0), size=images_per_class.shape))
    proportions = unnormalized / unnormalized.sum()
    desired = np.floor(proportions * (support_set_size - num_ways)).astype("int32") + 1
    return class_ids, int(num_query), np.minimum(desired, num_remaining)


def test_bilevel_episodes_are_meta_datasets_draw_for_draw(make_dataset):
    """Including the ignore-hierarchy coin (sampling.py:436), one uniform per episode."""
    supers = np.array([0] * 8 + [1] * 12 + [2] * 5 + [3] * 60)
    sizes = np.array(([20, 40, 15, 60] * 22)[:len(supers)])
    ds = make_dataset("d", sizes.tolist(), super_categories=supers.tolist())
    pools = compute_shared_pools(ds.labels, len(supers))
    for seed in range(300):
        ep = sample_meta_dataset_episode(pools, make_rng(seed), "d", ds.super_categories)
        class_ids, q, shots = reference_bilevel_episode(supers, sizes, make_rng(seed))
        assert ep.class_ids.tolist() == class_ids.tolist()
        assert (np.bincount(ep.query_labels, minlength=ep.n_ways) == q).all()
        assert np.bincount(ep.support_labels, minlength=ep.n_ways).tolist() == shots.tolist()


def test_too_few_classes_is_a_clear_error(make_dataset):
    ds = make_dataset("small", [20, 20, 20, 1])
    with pytest.raises(ValueError, match="'small' has 3 classes .* expected at least 5"):
        sample_meta_dataset_episode(compute_shared_pools(ds.labels, 4), make_rng(0), "small")
