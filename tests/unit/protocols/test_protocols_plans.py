"""plan_test_episodes / plan_meta_train_view / plan_meta_valid_view, per protocol."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from submission_api.protocols import (
    ProtocolParams,
    plan_meta_train_view,
    plan_meta_valid_view,
    plan_test_episodes,
)
from submission_api.protocols.splits import compute_held_out_images, compute_within_domain_split
from submission_api.sampling import (
    check_episode,
    compute_episodes_digest,
    sample_fixed_episode,
)


def _assert_run_pools_disjoint(episodes):
    for name in {e.dataset for e in episodes}:
        mine = [e for e in episodes if e.dataset == name]
        support = np.concatenate([e.support_idx for e in mine])
        query = np.concatenate([e.query_idx for e in mine])
        assert np.intersect1d(support, query).size == 0, name


def _assert_tasks_draw_from_whole_classes(episodes):
    """per_task pools: some image is a query of one task and a support image of another."""
    for name in {e.dataset for e in episodes}:
        mine = [e for e in episodes if e.dataset == name]
        support = np.concatenate([e.support_idx for e in mine])
        query = np.concatenate([e.query_idx for e in mine])
        assert np.intersect1d(support, query).size > 0, name


@pytest.mark.parametrize("name", ["cross-domain", "fixed", "meta-dataset"])
def test_test_episodes_come_from_meta_test_datasets_t_each(collection, name):
    params = ProtocolParams(name=name, tasks_per_dataset=6, test_pools="per_run")
    episodes = plan_test_episodes(params, collection, test_seed=12)
    assert [e.dataset for e in episodes] == ["te1"] * 6 + ["te2"] * 6
    for e in episodes:
        check_episode(e)
        assert e.group == "test"
    _assert_run_pools_disjoint(episodes)
    if name == "fixed":
        assert {(e.n_ways, e.n_shots, len(e.query_idx)) for e in episodes} == {(5, 5, 75)}


@pytest.mark.parametrize("name", ["cross-domain", "fixed", "meta-dataset", "id-ood"])
def test_test_tasks_draw_afresh_from_the_whole_class_by_default(collection, name):
    params = ProtocolParams(name=name, tasks_per_dataset=30)
    assert params.test_pools == "per_task"
    episodes = plan_test_episodes(params, collection, test_seed=12)
    for e in episodes:
        check_episode(e)  # support and query of one task never overlap
    _assert_tasks_draw_from_whole_classes(episodes)


def test_fewstab_draws_from_whole_classes_by_default_and_offers_run_pools():
    assert ProtocolParams(name="fewstab").test_pools == "per_task"
    assert ProtocolParams(name="fewstab", test_pools="per_run").test_pools == "per_run"
    with pytest.raises(ValueError, match="expected one of"):
        ProtocolParams(test_pools="sometimes")


def test_meta_dataset_episodes_of_a_hierarchical_dataset_stay_in_one_super_category(collection):
    params = ProtocolParams(name="meta-dataset", tasks_per_dataset=10, datasets=("te1",),
                            hierarchical_datasets=("te1",))
    supers = collection.datasets["te1"].super_categories
    for e in plan_test_episodes(params, collection, test_seed=0):
        assert len(set(supers[e.class_ids].tolist())) == 1


def test_views_of_cross_domain_are_whole_meta_train_and_meta_valid(collection):
    params = ProtocolParams()
    train = plan_meta_train_view(params, collection)
    assert sorted(train) == ["tr1", "tr2"]
    assert np.array_equal(train["tr1"], np.arange(240))
    assert list(plan_meta_valid_view(params, collection)) == ["va1"]


def test_test_tasks_depend_on_the_test_seed_alone_and_repeat(collection):
    """MetaDL ran its 3 runs "with a different ingestion seed while the scoring seed remains the
    same": one argument, the phase's test seed, decides the tasks; equal seeds, equal tasks."""
    params = ProtocolParams(tasks_per_dataset=3)
    a, b = (plan_test_episodes(params, collection, test_seed=s) for s in (51, 52))
    again = plan_test_episodes(params, collection, test_seed=51)
    assert compute_episodes_digest(a) == compute_episodes_digest(again)
    assert compute_episodes_digest(a) != compute_episodes_digest(b)


def test_a_run_seed_cannot_enter_test_task_sampling(collection):
    with pytest.raises(ValueError, match="expected one non-negative int"):
        plan_test_episodes(ProtocolParams(), collection, (5, 1))


def test_within_domain_split_is_disjoint_complete_and_seeded():
    train, valid, test = compute_within_domain_split(40, (0.7, 0.15, 0.15), 9, "d")
    assert (len(train), len(valid), len(test)) == (28, 6, 6)
    assert sorted(np.concatenate([train, valid, test]).tolist()) == list(range(40))
    again = compute_within_domain_split(40, (0.7, 0.15, 0.15), 9, "d")
    assert all(np.array_equal(x, y) for x, y in zip((train, valid, test), again, strict=True))
    other = compute_within_domain_split(40, (0.7, 0.15, 0.15), 10, "d")
    assert not np.array_equal(test, other[2])


def test_within_domain_with_too_few_classes_is_a_clear_error():
    with pytest.raises(ValueError, match="leaves 0 training classes"):
        compute_within_domain_split(2, (0.7, 0.15, 0.15), 0, "tiny")


def test_within_domain_tests_only_test_classes_and_views_only_train_and_valid(collection):
    params = ProtocolParams(name="within-domain", tasks_per_dataset=4, datasets=("te1",),
                            split_seed=3, test_pools="per_run")
    ds = collection.datasets["te1"]
    train_c, valid_c, test_c = compute_within_domain_split(30, params.split_fractions, 3, "te1")
    for seed in (1, 2):
        episodes = plan_test_episodes(params, collection, test_seed=seed)
        assert len(episodes) == 4
        for e in episodes:
            assert np.isin(e.class_ids, test_c).all()
        _assert_run_pools_disjoint(episodes)
    train_view = plan_meta_train_view(params, collection)["te1"]
    valid_view = plan_meta_valid_view(params, collection)["te1"]
    assert np.isin(ds.labels[train_view], train_c).all() and len(train_view) == 40 * len(train_c)
    assert np.isin(ds.labels[valid_view], valid_c).all() and len(valid_view) == 40 * len(valid_c)


def test_id_ood_held_out_images_never_reach_the_meta_train_view(collection):
    params = ProtocolParams(name="id-ood", tasks_per_dataset=3, split_seed=4,
                            test_pools="per_run")
    view = plan_meta_train_view(params, collection)
    for name in ("tr1", "tr2"):
        ds = collection.datasets[name]
        held = compute_held_out_images(ds.labels, len(ds.class_names), 0.2, 4, name)
        assert np.bincount(ds.labels[held]).tolist() == [8] * len(ds.class_names)
        assert np.intersect1d(view[name], held).size == 0
        assert len(view[name]) + len(held) == len(ds.labels)
    episodes = plan_test_episodes(params, collection, test_seed=11)
    groups = {}
    for e in episodes:
        groups.setdefault(e.group, set()).add(e.dataset)
        if e.group == "BaseGen":
            ds = collection.datasets[e.dataset]
            held = compute_held_out_images(ds.labels, len(ds.class_names), 0.2, 4, e.dataset)
            assert np.isin(np.concatenate([e.support_idx, e.query_idx]), held).all()
    assert groups == {"BaseGen": {"tr1", "tr2"}, "ValGen": {"va1"}, "NovelGen": {"te1", "te2"}}
    _assert_run_pools_disjoint(episodes)


def test_bad_seed_and_unknown_dataset_are_clear_errors(collection):
    with pytest.raises(ValueError, match="expected one non-negative int"):
        plan_test_episodes(ProtocolParams(), collection, test_seed=-3)
    with pytest.raises(ValueError, match="'nope' is not in collection 'tiny'"):
        plan_test_episodes(ProtocolParams(datasets=("nope",)), collection, test_seed=0)


def test_within_domain_with_fewer_test_classes_than_ways_names_the_split(collection):
    params = ProtocolParams(name="within-domain", datasets=("te2",))
    with pytest.raises(ValueError, match=r"leaves 1 test classes, 1 able to give 5 shots \+ 20 "
                                         r"queries, expected >= n_ways=5"):
        plan_test_episodes(params, collection, test_seed=0)


def test_meta_dataset_plan_keeps_the_paper_minimums_and_600_tasks_by_default(collection):
    from submission_api.sampling import meta_dataset as md

    assert ProtocolParams(name="meta-dataset").tasks_per_dataset == 600
    params = ProtocolParams(name="meta-dataset", tasks_per_dataset=30)
    episodes = plan_test_episodes(params, collection, test_seed=27)
    assert [e.dataset for e in episodes] == ["te1"] * 30 + ["te2"] * 30
    for e in episodes:
        counts = np.bincount(e.query_labels, minlength=e.n_ways)
        assert md.MD_MIN_WAYS <= e.n_ways <= md.MD_MAX_WAYS_UPPER_BOUND
        assert len(set(counts.tolist())) == 1 and 1 <= counts[0] <= md.MD_MAX_NUM_QUERY
        assert e.n_ways <= len(e.support_idx) <= md.MD_MAX_SUPPORT_SET_SIZE
    assert len({len(e.support_idx) for e in episodes}) > 1  # variable-shot


def test_meta_dataset_on_a_dataset_with_fewer_than_5_classes_is_a_clear_error(collection):
    from protocol_fakes import build_dataset

    from submission_api.data.collection import Collection

    small = Collection(name="s", datasets={"four": build_dataset("four", [40] * 4)},
                       splits={"meta-test": ["four"]})
    with pytest.raises(ValueError, match="'four' has 4 classes.*at least 5"):
        plan_test_episodes(ProtocolParams(name="meta-dataset", tasks_per_dataset=1), small,
                           test_seed=0)


def test_a_dataset_both_meta_valid_and_meta_test_is_refused(collection):
    from submission_api.data.collection import Collection

    both = Collection(name="c", datasets=collection.datasets,
                      splits={**collection.splits, "meta-valid": ["va1", "te1"]})
    with pytest.raises(ValueError, match=r"Datasets \['te1'\] are test datasets and also"):
        plan_test_episodes(ProtocolParams(tasks_per_dataset=1), both, test_seed=0)
    within = ProtocolParams(name="within-domain", tasks_per_dataset=1, datasets=("te1",))
    assert plan_test_episodes(within, both, test_seed=0)  # within-domain splits classes


def test_every_planned_task_is_checked(collection, monkeypatch):
    from submission_api.protocols import plans

    def overlapping(pools, rng, dataset, *args):
        ep = sample_fixed_episode(pools, rng, dataset, *args)
        return dataclasses.replace(ep, query_idx=ep.support_idx.copy(),
                                   query_labels=ep.support_labels.copy())

    monkeypatch.setattr(plans, "sample_fixed_episode", overlapping)
    with pytest.raises(ValueError, match="both support and query"):
        plan_test_episodes(ProtocolParams(name="fixed", tasks_per_dataset=1), collection, 0)


def test_bilevel_sampling_only_on_the_datasets_the_phase_marks_hierarchical(collection):
    """Meta-Dataset samples by super-category for Omniglot alone: a super-category column by
    itself (te1 has one) leaves sampling flat."""
    supers = collection.datasets["te1"].super_categories

    def spans(params):
        return [len(set(supers[e.class_ids].tolist()))
                for e in plan_test_episodes(params, collection, 4) if e.dataset == "te1"]

    flat = spans(ProtocolParams(name="meta-dataset", tasks_per_dataset=20, datasets=("te1",)))
    assert max(flat) > 1
    marked = ProtocolParams(name="meta-dataset", tasks_per_dataset=20, datasets=("te1",),
                            hierarchical_datasets=("te1",))
    assert set(spans(marked)) == {1}
    assert ProtocolParams.from_dict(marked.to_dict()) == marked
    with pytest.raises(ValueError, match="'te2' is listed in hierarchical_datasets but has no"):
        plan_test_episodes(ProtocolParams(name="meta-dataset", tasks_per_dataset=1,
                                          datasets=("te2",), hierarchical_datasets=("te2",)),
                           collection, 4)
    with pytest.raises(ValueError, match="only 'meta-dataset' samples classes by super-category"):
        ProtocolParams(name="cross-domain", hierarchical_datasets=("te1",))


def test_id_ood_same_benchmark_novelgen_tests_novel_classes_of_the_meta_train_datasets():
    """Setlur et al.'s NovelGen: novel classes of the same benchmark. The default NovelGen
    (meta-test datasets) is a cross-dataset shift."""
    from protocol_fakes import build_dataset

    from submission_api.data.collection import Collection
    from submission_api.protocols.splits import compute_within_domain_split

    bench = Collection(name="b", datasets={"big": build_dataset("big", [40] * 40),
                                           "other": build_dataset("other", [40] * 10)},
                       splits={"meta-train": ["big"], "meta-test": ["other"]})
    assert ProtocolParams(name="id-ood").id_ood_novel == "cross-dataset"
    params = ProtocolParams(name="id-ood", id_ood_novel="same-benchmark", tasks_per_dataset=3,
                            split_fractions=(0.5, 0.25, 0.25), split_seed=2)
    train_c, valid_c, test_c = compute_within_domain_split(40, (0.5, 0.25, 0.25), 2, "big")
    labels = bench.datasets["big"].labels
    train_view = plan_meta_train_view(params, bench)["big"]
    assert set(np.unique(labels[train_view]).tolist()) == set(train_c.tolist())
    assert set(np.unique(labels[plan_meta_valid_view(params, bench)["big"]]).tolist()) == set(
        valid_c.tolist())
    groups = {}
    for e in plan_test_episodes(params, bench, test_seed=5):
        groups.setdefault(e.group, set()).update(e.class_ids.tolist())
        assert e.dataset == "big"
        assert not np.isin(np.concatenate([e.support_idx, e.query_idx]), train_view).any()
    assert groups["BaseGen"] <= set(train_c.tolist())
    assert groups["ValGen"] <= set(valid_c.tolist())
    assert groups["NovelGen"] <= set(test_c.tolist())
    with pytest.raises(ValueError, match="'cross-dataset' or 'same-benchmark' for id-ood"):
        ProtocolParams(name="fixed", id_ood_novel="same-benchmark")
def test_protocol_params_offer_exactly_the_pool_rules_sampling_knows():
    from submission_api.protocols import params
    from submission_api.sampling import pools

    assert params.TEST_POOLS == pools.TEST_POOLS
