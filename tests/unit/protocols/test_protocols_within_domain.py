"""Within-domain: which datasets are tested, which reach the views, and the clear failures."""

from __future__ import annotations

import numpy as np
import pytest
from protocol_fakes import build_dataset

from submission_api.data.collection import Collection
from submission_api.protocols import (
    ProtocolParams,
    plan_meta_train_view,
    plan_meta_valid_view,
    plan_test_episodes,
)
from submission_api.protocols.within_domain import (
    compute_within_domain_splits,
    count_servable_classes,
)


def _collection(**class_counts: int) -> Collection:
    datasets = {name: build_dataset(name, [40] * n) for name, n in class_counts.items()}
    return Collection(name="wd", datasets=datasets, splits={"meta-train": [], "meta-test": []})


def test_only_datasets_whose_test_split_serves_the_task_are_tested():
    collection = _collection(big=34, small=20, tiny=2)  # test classes 5, 3; tiny: no split
    params = ProtocolParams(name="within-domain", tasks_per_dataset=3)
    episodes = plan_test_episodes(params, collection, test_seed=0)
    assert [e.dataset for e in episodes] == ["big"] * 3
    test_classes = compute_within_domain_splits(params, collection)["big"][2]
    assert all(np.isin(e.class_ids, test_classes).all() for e in episodes)


def test_untested_datasets_still_give_their_train_and_valid_classes_but_never_test_ones():
    collection = _collection(big=34, small=20, tiny=2)
    params = ProtocolParams(name="within-domain", split_seed=7)
    splits = compute_within_domain_splits(params, collection)
    assert sorted(splits) == ["big", "small"]
    train = plan_meta_train_view(params, collection)
    valid = plan_meta_valid_view(params, collection)
    assert sorted(train) == sorted(valid) == ["big", "small"]
    for name, (train_c, valid_c, test_c) in splits.items():
        labels = collection.datasets[name].labels
        assert set(labels[train[name]].tolist()) == set(train_c.tolist())
        assert set(labels[valid[name]].tolist()) == set(valid_c.tolist())
        assert not np.isin(labels[np.concatenate([train[name], valid[name]])], test_c).any()


def test_no_dataset_able_to_serve_is_a_clear_error_listing_each():
    collection = _collection(a=20, b=20)
    params = ProtocolParams(name="within-domain")
    with pytest.raises(ValueError, match=r"No dataset of collection 'wd'.*a: 3 of 3 test "
                                         r"classes; b: 3 of 3 test classes.*lower n_ways"):
        plan_test_episodes(params, collection, test_seed=0)
    three_way = ProtocolParams(name="within-domain", n_ways=3, tasks_per_dataset=2)
    assert len(plan_test_episodes(three_way, collection, test_seed=0)) == 4


def test_a_named_dataset_that_cannot_be_split_is_an_error_not_a_skip():
    collection = _collection(big=34, tiny=2)
    params = ProtocolParams(name="within-domain", datasets=("big", "tiny"))
    with pytest.raises(ValueError, match="'tiny' has 2 classes.*leaves 0 training classes"):
        plan_meta_train_view(params, collection)


def test_servable_classes_count_the_images_the_disjoint_pools_leave():
    ds = build_dataset("d", [40, 25, 24, 10])
    # 5 shots + 20 queries: 40 -> 20/20, 25 -> 20 query + 5 support, 24 -> 4 support, 10 -> none
    assert count_servable_classes(ds.labels, np.arange(4), 5, 20) == 2
    assert count_servable_classes(ds.labels, np.arange(4), 4, 20) == 3


def test_the_split_is_the_same_for_every_run_and_depends_on_split_seed():
    collection = _collection(big=40)
    by_seed = {}
    for split_seed in (1, 2):
        params = ProtocolParams(name="within-domain", tasks_per_dataset=4, split_seed=split_seed)
        runs = [plan_test_episodes(params, collection, test_seed=r) for r in (0, 1, 2)]
        used = [set(np.concatenate([e.class_ids for e in run]).tolist()) for run in runs]
        test_classes = set(compute_within_domain_splits(params, collection)["big"][2].tolist())
        assert all(u <= test_classes for u in used)
        by_seed[split_seed] = test_classes
    assert by_seed[1] != by_seed[2]


def test_the_per_dataset_variant_meta_trains_on_the_tested_dataset_alone():
    """The NeurIPS'22 paper's within-domain setting: one dataset 70/15/15, meta-trained on it
    only; the default "collection" variant trains on every dataset's training classes."""
    collection = _collection(big=34, other=34, small=20)
    assert ProtocolParams(name="within-domain").within_domain_variant == "collection"
    assert sorted(plan_meta_train_view(ProtocolParams(name="within-domain"), collection)) == [
        "big", "other", "small"]
    params = ProtocolParams(name="within-domain", within_domain_variant="per-dataset",
                            datasets=("big",), tasks_per_dataset=2)
    assert list(plan_meta_train_view(params, collection)) == ["big"]
    assert list(plan_meta_valid_view(params, collection)) == ["big"]
    assert {e.dataset for e in plan_test_episodes(params, collection, 0)} == {"big"}
    assert ProtocolParams.from_dict(params.to_dict()) == params
    with pytest.raises(ValueError, match="expected exactly one dataset.*one phase per dataset"):
        ProtocolParams(name="within-domain", within_domain_variant="per-dataset")
    with pytest.raises(ValueError, match="it is a within-domain parameter"):
        ProtocolParams(name="fixed", within_domain_variant="collection")
