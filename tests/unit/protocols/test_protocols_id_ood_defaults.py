"""Issue 36.4: id-ood same-benchmark serves 5-way tasks on 20-class datasets by default, and
says which share is short when it cannot; a phase chooses whether its runs share test tasks."""

from __future__ import annotations

import numpy as np
import pytest
from protocol_fakes import build_dataset

from submission_api.data.collection import Collection
from submission_api.protocols import ProtocolParams, compute_run_test_seed, plan_test_episodes


def sample_like() -> Collection:
    """The sample collection's shape: 3 meta-train datasets of 20 classes x 40 images."""
    names = ("stripes", "blobs", "glyphs")
    return Collection(name="sample-like",
                      datasets={n: build_dataset(n, [40] * 20) for n in (*names, "spectra")},
                      splits={"meta-train": list(names), "meta-test": ["spectra"]})


def test_same_benchmark_plans_5_way_valgen_and_novelgen_tasks_on_20_class_datasets():
    params = ProtocolParams(name="id-ood", id_ood_novel="same-benchmark", tasks_per_dataset=2)
    assert params.split_fractions == (0.5, 0.25, 0.25)
    episodes = plan_test_episodes(params, sample_like(), test_seed=3)
    groups = {e.group for e in episodes}
    assert groups == {"BaseGen", "ValGen", "NovelGen"}
    assert all(e.n_ways == 5 for e in episodes)
    assert ProtocolParams.from_dict(params.to_dict()) == params


def test_a_short_class_share_names_the_share_the_counts_and_a_fix_that_can_work():
    params = ProtocolParams(name="id-ood", id_ood_novel="same-benchmark", tasks_per_dataset=2,
                            split_fractions=(0.7, 0.15, 0.15))
    with pytest.raises(ValueError) as error:
        plan_test_episodes(params, sample_like(), test_seed=3)
    message = str(error.value)
    assert "3 ValGen classes" in message and "3 NovelGen classes" in message
    assert "20 classes" in message and "[0.5, 0.25, 0.25] gives 10/5/5" in message
    assert "at least 30 classes" in message and "lower n_ways" in message
    assert "ask fewer ways, shots or queries" not in message


def test_other_protocols_keep_the_70_15_15_split():
    assert ProtocolParams(name="within-domain").split_fractions == (0.7, 0.15, 0.15)
    assert ProtocolParams(name="id-ood").split_fractions == (0.7, 0.15, 0.15)


def test_runs_share_the_phases_test_tasks_by_default_and_draw_their_own_when_fresh():
    shared = ProtocolParams(name="cross-domain", tasks_per_dataset=3)
    fresh = ProtocolParams(name="cross-domain", tasks_per_dataset=3, run_test_tasks="fresh")
    assert compute_run_test_seed(shared, 11, 0) == compute_run_test_seed(shared, 11, 2) == 11
    seeds = {compute_run_test_seed(fresh, 11, run) for run in range(3)}
    assert len(seeds) == 3 and 11 not in seeds
    assert compute_run_test_seed(fresh, 11, 1) == compute_run_test_seed(fresh, 11, 1)
    collection = sample_like()
    first, second = (plan_test_episodes(fresh, collection, compute_run_test_seed(fresh, 11, r))
                     for r in (0, 1))
    assert any(not np.array_equal(a.query_idx, b.query_idx)
               for a, b in zip(first, second, strict=True))
    with pytest.raises(ValueError, match="run_test_tasks='sometimes'"):
        ProtocolParams(run_test_tasks="sometimes")


def test_fewstab_with_its_only_annotated_dataset_in_meta_valid_says_so_not_no_annotations():
    """Issue 36.5: the message said the collection had no attribute annotations."""
    annotated = build_dataset("spurious", [20] * 5, attributes=[frozenset({"a"})] * 100)
    collection = Collection(name="c", datasets={"spurious": annotated,
                                                "plain": build_dataset("plain", [20] * 5)},
                            splits={"meta-train": ["plain"], "meta-valid": ["spurious"]})
    with pytest.raises(ValueError) as error:
        plan_test_episodes(ProtocolParams(name="fewstab", tasks_per_dataset=1), collection, 1)
    message = str(error.value)
    assert "'spurious' (meta-valid)" in message and "no attribute annotations" not in message
    assert "move one out of those splits" in message
