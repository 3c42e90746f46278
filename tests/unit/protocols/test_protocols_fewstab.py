"""FewSTAB attribute-biased tasks: hard conditions, relaxation ladder, groups."""

from __future__ import annotations

import numpy as np
import pytest
from protocol_fakes import build_attributes, build_dataset

from submission_api.protocols import ProtocolParams, plan_test_episodes, sample_fewstab_episode
from submission_api.protocols.fewstab import sample_distinct_attributes
from submission_api.sampling import make_rng, sample_disjoint_pools


def _pools(ds, n_queries=15, seed=0):
    return sample_disjoint_pools(ds.labels, len(ds.class_names), n_queries, make_rng(seed))


def _check_conditions(draw, attributes, pools):
    ep = draw.episode
    assert len(set(draw.attributes)) == ep.n_ways
    for j, (c, a) in enumerate(zip(ep.class_ids, draw.attributes, strict=True)):
        support = ep.support_idx[ep.support_labels == j]
        query = ep.query_idx[ep.query_labels == j]
        assert all(a in attributes[i] for i in support)
        assert all(a not in attributes[i] for i in query)
        assert np.isin(support, pools.support[c]).all() and np.isin(query, pools.query[c]).all()
        others = set(draw.attributes) - {a}
        biased = [i for i in query if attributes[i] & others]
        if draw.query_levels[j] == 0:
            assert len(biased) == len(query)
        else:  # every available biased query image was used before relaxing
            pool_biased = [i for i in pools.query[c] if a not in attributes[i]
                           and attributes[i] & others]
            assert len(biased) == len(pool_biased) < len(query)


@pytest.mark.parametrize("n_shots", [1, 5])
def test_support_carries_and_query_lacks_each_way_attribute(n_shots):
    attributes = build_attributes(8, 60)
    ds = build_dataset("d", [60] * 8, attributes=attributes)
    pools = _pools(ds)
    rng = make_rng(3)
    for _ in range(10):
        draw = sample_fewstab_episode(pools, attributes, rng, "d", 5, n_shots, 15, 5, 15)
        assert draw.episode.group == "fewstab-A" and draw.attribute_level == 0
        assert np.bincount(draw.episode.query_labels).tolist() == [15] * 5
        _check_conditions(draw, attributes, pools)


def test_queries_relax_when_no_image_carries_another_way_attribute():
    attributes = [frozenset({f"a{c}"}) if r % 2 else frozenset() for c in range(6)
                  for r in range(40)]
    ds = build_dataset("d", [40] * 6, attributes=attributes)
    pools = _pools(ds, n_queries=5)
    draw = sample_fewstab_episode(pools, attributes, make_rng(1), "d", 5, 1, 5, 1, 5)
    assert draw.query_levels == (1,) * 5
    _check_conditions(draw, attributes, pools)


def test_attribute_thresholds_relax_to_what_the_task_needs():
    attributes = build_attributes(8, 60)
    ds = build_dataset("d", [60] * 8, attributes=attributes)
    pools = _pools(ds)
    draw = sample_fewstab_episode(pools, attributes, make_rng(2), "d", 5, 1, 15, 29, 15)
    assert draw.attribute_level == 1
    _check_conditions(draw, attributes, pools)


def test_no_distinct_attributes_is_a_clear_error():
    attributes = [frozenset({"same"}) if r % 2 else frozenset() for r in range(200)]
    ds = build_dataset("d", [40] * 5, attributes=attributes)
    with pytest.raises(ValueError, match="fewer than 5 classes have a distinct attribute"):
        sample_fewstab_episode(_pools(ds, 5), attributes, make_rng(0), "d", 5, 1, 5, 1, 5)


def test_distinct_matching_reassigns_attributes_when_needed():
    # class 0 could take a or b, class 1 only a: a matching must give 0 -> b, 1 -> a.
    for seed in range(10):
        pairs = sample_distinct_attributes([["a", "b"], ["a"]], 2, make_rng(seed))
        assert dict(pairs) == {0: "b", 1: "a"}


def test_plan_gives_biased_then_random_tasks_from_shared_run_pools(collection):
    params = ProtocolParams(name="fewstab", tasks_per_dataset=4)
    episodes = plan_test_episodes(params, collection, test_seed=1)
    assert [e.group for e in episodes] == ["fewstab-A"] * 4 + ["fewstab-R"] * 4
    assert {e.dataset for e in episodes} == {"te2"}  # te1 has no attributes
    support = np.concatenate([e.support_idx for e in episodes])
    query = np.concatenate([e.query_idx for e in episodes])
    assert np.intersect1d(support, query).size == 0
    with pytest.raises(ValueError, match="'te1' has no attribute annotations"):
        plan_test_episodes(ProtocolParams(name="fewstab", datasets=("te1",)), collection, 0)
