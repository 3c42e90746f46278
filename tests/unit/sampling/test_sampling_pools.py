"""Pools: shared for meta-train, disjoint per run for meta-test."""

from __future__ import annotations

import numpy as np
import pytest

from submission_api.sampling import (
    compute_class_members,
    compute_query_pool_size,
    compute_shared_pools,
    make_rng,
    sample_cross_domain_episode,
    sample_disjoint_pools,
)


@pytest.mark.parametrize(
    ("n_images", "n_queries", "expected"),
    [(40, 20, 20), (30, 20, 20), (21, 20, 20), (100, 20, 50), (20, 20, 10), (7, 10, 3), (1, 5, 0)],
)
def test_query_pool_size_follows_the_documented_rule(n_images, n_queries, expected):
    size = compute_query_pool_size(n_images, n_queries)
    assert size == expected
    if n_images > n_queries:
        assert n_images - size >= 1


def test_class_members_respect_allowed_indices():
    labels = np.array([0, 1, 0, 1, 2, 2])
    members = compute_class_members(labels, 4, allowed=np.array([5, 0, 1]))
    assert [m.tolist() for m in members] == [[0], [1], [5], []]


def test_class_members_reject_out_of_range_labels():
    with pytest.raises(ValueError, match="expected 0..1"):
        compute_class_members(np.array([0, 2]), 2)


def test_shared_pools_use_one_array_per_class(make_dataset):
    ds = make_dataset("d", [5, 6])
    pools = compute_shared_pools(ds.labels, 2)
    assert not pools.disjoint
    assert all(s is q for s, q in zip(pools.support, pools.query, strict=True))
    assert [len(p) for p in pools.support] == [5, 6]


def test_disjoint_pools_partition_every_class(make_dataset):
    ds = make_dataset("d", [40, 30, 100, 8])
    pools = sample_disjoint_pools(ds.labels, 4, 20, make_rng(1))
    assert pools.disjoint
    for c, members in enumerate(ds.class_members()):
        s, q = pools.support[c], pools.query[c]
        assert np.intersect1d(s, q).size == 0
        assert np.array_equal(np.sort(np.concatenate([s, q])), members)
        assert len(q) == compute_query_pool_size(len(members), 20)


def test_no_query_image_is_ever_a_support_image_in_a_whole_run(make_dataset):
    ds = make_dataset("d", [40] * 6 + [25] * 4)
    rng = make_rng(7, 3, "d")
    pools = sample_disjoint_pools(ds.labels, 10, 20, rng)
    episodes = [sample_cross_domain_episode(pools, rng, "d") for _ in range(60)]
    supports = np.unique(np.concatenate([e.support_idx for e in episodes]))
    queries = np.unique(np.concatenate([e.query_idx for e in episodes]))
    assert np.intersect1d(supports, queries).size == 0
    assert len(queries) > 20  # several classes' query pools were used
