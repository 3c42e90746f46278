"""Fixed and any-way any-shot (NeurIPS'22) episodes: ranges, balance, labels, shuffle."""

from __future__ import annotations

import numpy as np
import pytest

from submission_api.sampling import (
    TaskShape,
    check_episode,
    compute_shared_pools,
    make_rng,
    sample_cross_domain_episode,
    sample_disjoint_pools,
    sample_fixed_episode,
    sample_n_way_k_shot,
)


def _counts(labels, n_ways):
    return np.bincount(labels, minlength=n_ways)


@pytest.mark.parametrize("disjoint", [False, True])
def test_cross_domain_episodes_respect_the_neurips22_ranges(make_dataset, disjoint):
    ds = make_dataset("d", [40] * 25 + [30] * 5)
    rng = make_rng(0)
    pools = (sample_disjoint_pools(ds.labels, 30, 20, rng) if disjoint
             else compute_shared_pools(ds.labels, 30))
    seen_ways, seen_shots = set(), set()
    for _ in range(150):
        ep = sample_cross_domain_episode(pools, rng, "d")
        check_episode(ep)
        assert 2 <= ep.n_ways <= 20
        spare = min(len(pools.support[c]) - (0 if disjoint else 20) for c in ep.class_ids)
        assert 1 <= ep.n_shots <= min(20, spare)
        assert (_counts(ep.support_labels, ep.n_ways) == ep.n_shots).all()
        assert (_counts(ep.query_labels, ep.n_ways) == 20).all()
        assert (ds.labels[ep.support_idx] == ep.class_ids[ep.support_labels]).all()
        assert (ds.labels[ep.query_idx] == ep.class_ids[ep.query_labels]).all()
        seen_ways.add(ep.n_ways)
        seen_shots.add(ep.n_shots)
    assert min(seen_ways) <= 4 and max(seen_ways) >= 17
    assert min(seen_shots) <= 3 and max(seen_shots) >= 8


def test_support_and_query_are_shuffled(make_dataset):
    ds = make_dataset("d", [40] * 10)
    rng = make_rng(1)
    ep = sample_fixed_episode(compute_shared_pools(ds.labels, 10), rng, "d", 5, 5, 20)
    assert not np.array_equal(ep.support_labels, np.sort(ep.support_labels))
    assert not np.array_equal(ep.query_labels, np.sort(ep.query_labels))


def test_classes_that_cannot_spare_one_shot_plus_20_queries_are_never_chosen(make_dataset):
    ds = make_dataset("d", [40, 40, 20, 15, 40])
    pools = compute_shared_pools(ds.labels, 5)
    rng = make_rng(2)
    episodes = [sample_cross_domain_episode(pools, rng, "d") for _ in range(50)]
    chosen = {int(c) for ep in episodes for c in ep.class_ids}
    assert chosen == {0, 1, 4}


def test_fewer_than_two_eligible_classes_is_a_clear_error(make_dataset):
    ds = make_dataset("tiny", [40, 20, 20])
    with pytest.raises(ValueError, match=r"'tiny' has 1 classes able to give 1 shot\(s\) \+ 20"):
        sample_cross_domain_episode(compute_shared_pools(ds.labels, 3), make_rng(0), "tiny")


def test_fixed_episode_has_exact_shape(make_dataset):
    ds = make_dataset("d", [12] * 8)
    ep = sample_fixed_episode(compute_shared_pools(ds.labels, 8), make_rng(3), "d", 5, 2, 7)
    check_episode(ep)
    assert (ep.n_ways, ep.n_shots) == (5, 2)
    assert len(ep.support_idx) == 10 and len(ep.query_idx) == 35
    assert np.intersect1d(ep.support_idx, ep.query_idx).size == 0


def test_same_seed_gives_identical_episodes(make_dataset):
    ds = make_dataset("d", [40] * 12)
    pools = compute_shared_pools(ds.labels, 12)
    a = sample_cross_domain_episode(pools, make_rng(5, 6), "d")
    b = sample_cross_domain_episode(pools, make_rng(5, 6), "d")
    c = sample_cross_domain_episode(pools, make_rng(5, 7), "d")
    assert np.array_equal(a.support_idx, b.support_idx)
    assert np.array_equal(a.query_idx, b.query_idx)
    assert not np.array_equal(a.query_idx, c.query_idx)


@pytest.mark.parametrize(
    "kwargs",
    [{"n_ways": 1}, {"n_shots": 0}, {"min_ways": 0}, {"min_shots": 3, "max_shots": 2},
     {"n_queries": 0}],
)
def test_task_shape_rejects_bad_values(kwargs):
    with pytest.raises(ValueError, match="expected"):
        TaskShape(**kwargs)


def test_fixed_ways_with_range_of_shots(make_dataset):
    ds = make_dataset("d", [30] * 6)
    rng = make_rng(4)
    shape = TaskShape(n_ways=3, n_shots=None, min_shots=2, max_shots=4, n_queries=5)
    for _ in range(20):
        ep = sample_n_way_k_shot(compute_shared_pools(ds.labels, 6), rng, "d", shape)
        assert ep.n_ways == 3 and 2 <= ep.n_shots <= 4
