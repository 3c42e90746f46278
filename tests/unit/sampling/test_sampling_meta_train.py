"""Meta-train / meta-valid generators, materialisation, train_classes / total_classes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from submission_api.config import parse_submission_config
from submission_api.sampling import (
    compute_shared_pools,
    make_rng,
    materialize_task,
    sample_fixed_episode,
)
from submission_api.sampling.meta_train import (
    build_meta_generators,
    build_meta_train_generator,
    build_meta_valid_generator,
    compute_train_classes,
    split_validation_datasets,
)


def _image_ids(x: torch.Tensor) -> np.ndarray:
    pix = (x[:, :2, 0, 0] * 255).round().long().numpy()
    return pix[:, 0] + 256 * pix[:, 1]


def test_materialized_task_carries_the_episode_images_and_class_ids(make_dataset):
    ds = make_dataset("d", [8, 8, 8])
    ep = sample_fixed_episode(compute_shared_pools(ds.labels, 3), make_rng(0), "d", 2, 2, 3)
    task = materialize_task(ep, ds)
    x, y, y_orig = task.support_set
    assert x.dtype == torch.float32 and tuple(x.shape) == (4, 3, 128, 128)
    assert np.array_equal(_image_ids(x), ep.support_idx)
    assert y.dtype == torch.int64 and np.array_equal(y.numpy(), ep.support_labels)
    assert np.array_equal(y_orig.numpy(), ds.labels[ep.support_idx])
    assert np.array_equal(_image_ids(task.query_set[0]), ep.query_idx)
    assert (task.num_ways, task.num_shots, task.dataset) == (2, 2, "d")


def test_hidden_class_ids_leak_nothing(make_dataset):
    ds = make_dataset("d", [8, 8, 8])
    ep = sample_fixed_episode(compute_shared_pools(ds.labels, 3), make_rng(0), "d", 2, 2, 3)
    task = materialize_task(ep, ds, hide_class_ids=True)
    assert np.array_equal(task.support_set[2].numpy(), task.support_set[1].numpy())
    assert task.original_class_idx.tolist() == [0, 1] and task.dataset is None


def test_task_mode_yields_n_tasks_from_every_dataset(make_dataset):
    datasets = {n: make_dataset(n, [25] * 6) for n in ("b", "a")}
    config = parse_submission_config({"train_config": {"k": 2, "query_images_per_class": 3}})
    gen = build_meta_train_generator(datasets, config, make_rng(1))
    tasks = list(gen(12))
    assert len(tasks) == 12 and {t.dataset for t in tasks} == {"a", "b"}
    for t in tasks:
        assert t.num_ways == 5 and t.support_set[0].shape[0] == 10
        assert t.query_set[0].shape[0] == 15
    assert compute_train_classes(datasets, config) == (5, 12)


def test_task_mode_respects_the_view(make_dataset):
    ds = make_dataset("a", [25] * 6)
    view = {"a": np.flatnonzero(ds.labels < 5)}
    config = parse_submission_config({"train_config": {"k": 1, "query_images_per_class": 2}})
    gen = build_meta_train_generator([ds], config, make_rng(2), views=view)
    for task in gen(5):
        seen = np.concatenate([_image_ids(task.support_set[0]), _image_ids(task.query_set[0])])
        assert np.isin(seen, view["a"]).all()


def test_batch_mode_labels_are_global_class_ids(make_dataset):
    datasets = [make_dataset("b", [3, 3]), make_dataset("a", [2, 2, 2])]
    config = parse_submission_config({"train_data_format": "batch", "batch_size": 4})
    gen = build_meta_train_generator(datasets, config, make_rng(3))
    batches = list(gen(6))  # 24 images > 12: crosses epochs
    assert len(batches) == 6
    by_name = {ds.name: ds for ds in datasets}
    ids, labels = [], []
    for x, y in batches:
        assert tuple(x.shape) == (4, 3, 128, 128) and y.dtype == torch.int64
        ids.append(_image_ids(x))
        labels.append(y.numpy())
    ids, labels = np.concatenate(ids)[:12], np.concatenate(labels)[:12]
    # one epoch: "a" (sorted first) holds global classes 0..2, "b" classes 3..4
    assert sorted(labels.tolist()) == [0, 0, 1, 1, 2, 2, 3, 3, 3, 4, 4, 4]
    for i, g in zip(ids, labels, strict=True):
        name, local = ("a", g) if g < 3 else ("b", g - 3)
        assert by_name[name].labels[i] == local
    assert compute_train_classes(datasets, config) == (5, 5)


def test_valid_generator_is_none_without_validation_datasets(make_dataset):
    ds = make_dataset("a", [25] * 6)
    assert build_meta_valid_generator([ds], parse_submission_config({}), make_rng(0)) is None
    config = parse_submission_config(
        {"validation_datasets": 1, "valid_config": {"max_N": 3, "max_k": 2,
                                                    "query_images_per_class": 2}})
    gen = build_meta_valid_generator([ds], config, make_rng(0))
    assert all(2 <= t.num_ways <= 3 for t in gen(4))


def test_validation_datasets_are_taken_out_of_meta_train_when_no_meta_valid_split():
    config = parse_submission_config({"validation_datasets": 1})
    train, valid = split_validation_datasets(["c", "a", "b"], [], config, make_rng(4))
    assert len(valid) == 1 and sorted(train + valid) == ["a", "b", "c"]
    with pytest.raises(ValueError, match="validation_datasets=1 but the meta-train view has 1"):
        split_validation_datasets(["a"], [], config, make_rng(4))
    train, valid = split_validation_datasets(["a"], ["v"], config, make_rng(4))
    assert (train, valid) == (["a"], ["v"])


def test_generator_that_cannot_serve_its_shape_is_a_clear_error(make_dataset):
    ds = make_dataset("a", [10] * 3)
    with pytest.raises(ValueError, match="can give tasks of"):
        build_meta_train_generator([ds], parse_submission_config({}), make_rng(0))


VALID_SHAPE = {"valid_config": {"max_N": 3, "max_k": 2, "query_images_per_class": 2}}


def _names(gen, n=12):
    return {t.dataset for t in gen(n)}


@pytest.mark.parametrize(
    ("validation", "n_valid_view", "train_expected", "valid_expected"),
    [
        (None, 2, {"a", "b", "c"}, None),  # no generator, even with a meta-valid view
        (1, 2, {"a", "b", "c"}, 1),  # one of the protocol's meta-valid datasets
        (5, 2, {"a", "b", "c"}, 2),  # all of them when fewer than asked
        (1, 0, 2, 1),  # no meta-valid view: taken out of meta-train, as in the kit
    ],
)
def test_validation_datasets_apply_on_top_of_the_protocol_views(
    make_dataset, validation, n_valid_view, train_expected, valid_expected
):
    train = [make_dataset(n, [25] * 6) for n in ("c", "a", "b")]
    valid = [make_dataset(n, [25] * 6) for n in ("v1", "v2")][:n_valid_view]
    config = parse_submission_config({"validation_datasets": validation, **VALID_SHAPE})
    train_gen, valid_gen = build_meta_generators(train, valid, config, make_rng(3))
    train_names = _names(train_gen, 30)
    if isinstance(train_expected, int):
        assert len(train_names) == train_expected
    else:
        assert train_names == train_expected
    if valid_expected is None:
        assert valid_gen is None
        return
    valid_names = _names(valid_gen, 30)
    assert len(valid_names) == valid_expected
    source = {"v1", "v2"} if n_valid_view else {"a", "b", "c"} - train_names
    assert valid_names <= source


def test_total_classes_leave_out_datasets_moved_to_validation(make_dataset):
    """NeurIPS'22 kit: `total_classes` counts the meta-train datasets left after
    `validation_datasets` took some out, not the ones moved to validation."""
    datasets = [make_dataset("a", [25] * 6), make_dataset("b", [25] * 5),
                make_dataset("c", [25] * 7)]
    config = parse_submission_config({"validation_datasets": 1,
                                      "train_config": {"k": 1, "query_images_per_class": 2}})
    train_gen, valid_gen = build_meta_generators(datasets, [], config, make_rng(4))
    kept = {ds.name for ds in train_gen.datasets}
    assert len(kept) == 2 and valid_gen is not None
    expected = sum(len(ds.class_names) for ds in datasets if ds.name in kept)
    assert compute_train_classes(train_gen.datasets, config) == (5, expected)
    assert expected < 18  # all three datasets hold 18 classes


def _digest(tasks) -> list[tuple]:
    return [(t.dataset, t.num_ways, t.num_shots, t.support_set[0].sum().item(),
             t.query_set[0].sum().item()) for t in tasks]


def test_the_meta_valid_generator_restarts_on_every_call_as_the_kit(make_dataset):
    """Kit: `self.generator = lambda n: self.generate_tasks(n, seed)`, a fresh RandomState per
    call: `valid(3)` is the same 3 tasks every time (baselines select checkpoints on them)."""
    train = [make_dataset(n, [25] * 6) for n in ("a", "b")]
    valid = [make_dataset("v", [25] * 6)]
    config = parse_submission_config({"validation_datasets": 1, **VALID_SHAPE})
    train_gen, valid_gen = build_meta_generators(train, valid, config, make_rng(8))
    first, second = _digest(valid_gen(3)), _digest(valid_gen(3))
    assert first == second
    assert _digest(valid_gen(5))[:3] == first
    assert _digest(train_gen(3)) != _digest(train_gen(3))  # meta-train continues (documented)


@pytest.mark.parametrize("validation", [None, 0])
def test_validation_datasets_null_or_0_give_no_meta_valid_generator(make_dataset, validation):
    train = [make_dataset(n, [25] * 6) for n in ("a", "b")]
    config = parse_submission_config({"validation_datasets": validation})
    train_gen, valid_gen = build_meta_generators(train, [make_dataset("v", [25] * 6)], config,
                                                 make_rng(8))
    assert valid_gen is None and [ds.name for ds in train_gen.datasets] == ["a", "b"]


def test_train_classes_is_none_when_n_is_null_as_the_kit(make_dataset):
    """Kit: `num_train_classes = train_generator_config["N"]`, passed as it is."""
    datasets = [make_dataset("a", [25] * 6)]
    config = parse_submission_config({"train_config": {"N": None, "min_N": 2, "max_N": 4,
                                                       "query_images_per_class": 5}})
    assert compute_train_classes(datasets, config) == (None, 6)
