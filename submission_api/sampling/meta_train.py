"""The meta-train and meta-valid generators handed to `MetaLearner.meta_fit`, as in the NeurIPS'22
kit: `gen(n)` yields `n` Tasks (task mode) or `n` batches `[X, y]` (batch mode).

Task mode: each task picks one dataset uniformly, then an episode of the config's shape from
shared pools (support and query without overlap inside a task). Batch mode: images of every
meta-train dataset in one shuffled stream; labels are global class ids `0..total_classes-1`,
datasets in name order, classes in id order.

Calls, as in the kit (`self.generator = lambda n: self.generate_tasks(n, seed)`, a fresh
`check_random_state(seed)` on every call): the meta-valid generator restarts from its seed on
every call, so `valid(10)` yields the same 10 tasks each time and a submission can select
checkpoints on them, as the kit's baselines do. The meta-train generator keeps its state between
calls (`gen(2); gen(3)` draws what `gen(5)` would): a deliberate difference, named in the
tutorial — under the kit a task-mode `meta_train_generator(n)` called in a loop would replay the
same n tasks; its batch mode already continued.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from submission_api.sampling.any_shot import (
    TaskShape,
    check_can_serve,
    sample_n_way_k_shot,
)
from submission_api.sampling.materialize import materialize_batch, materialize_task
from submission_api.sampling.pools import compute_shared_pools
from submission_api.task import Task

if TYPE_CHECKING:  # runtime import would be circular: config imports sampling.any_shot
    from submission_api.config import SubmissionConfig

Views = Mapping[str, np.ndarray] | None


def _sorted_datasets(datasets: Mapping[str, Any] | Sequence[Any]) -> list[Any]:
    items = list(datasets.values()) if isinstance(datasets, Mapping) else list(datasets)
    return sorted(items, key=lambda ds: ds.name)


def _allowed(views: Views, name: str) -> np.ndarray | None:
    return None if views is None else views.get(name, np.empty(0, dtype=np.int64))


class TaskGenerator:
    """`gen(n)` -> n Tasks; dataset uniform among those able to serve `shape`.

    `restart=True` (the meta-valid generator): every call starts again from one seed drawn from
    `rng` here, so every call with the same n yields the same tasks (module docstring).
    """

    def __init__(self, datasets: list[Any], shape: TaskShape, rng: np.random.Generator,
                 views: Views = None, restart: bool = False) -> None:
        self.shape, self.rng = shape, rng
        self.seed = int(rng.integers(2**63)) if restart else None
        self.datasets = list(datasets)  # what total_classes counts (kit: all kept datasets)
        self.entries = []
        for ds in datasets:
            pools = compute_shared_pools(ds.labels, len(ds.class_names), _allowed(views, ds.name))
            try:
                check_can_serve(pools, shape, ds.name)
            except ValueError:
                continue
            self.entries.append((ds, pools))
        if not self.entries:
            raise ValueError(
                f"None of the datasets {[ds.name for ds in datasets]} can give tasks of {shape}; "
                "expected at least one with enough classes and images per class; ask fewer "
                "ways, shots or queries in config.json."
            )

    def __call__(self, n: int) -> Iterator[Task]:
        rng = self.rng if self.seed is None else np.random.default_rng(self.seed)
        for _ in range(n):
            ds, pools = self.entries[int(rng.integers(len(self.entries)))]
            episode = sample_n_way_k_shot(pools, rng, ds.name, self.shape)
            yield materialize_task(episode, ds)


class BatchGenerator:
    """`gen(n)` -> n batches `[X float32 [b,3,128,128], y int64 [b]]` over every view image,
    epoch after epoch, each epoch a fresh permutation."""

    def __init__(self, datasets: list[Any], batch_size: int, rng: np.random.Generator,
                 views: Views = None) -> None:
        self.datasets, self.batch_size, self.rng = datasets, batch_size, rng
        owners, images, labels = [], [], []
        offset = 0
        for pos, ds in enumerate(datasets):
            allowed = _allowed(views, ds.name)
            idx = np.arange(len(ds.labels)) if allowed is None else np.unique(allowed)
            present, dense = np.unique(np.asarray(ds.labels)[idx], return_inverse=True)
            owners.append(np.full(len(idx), pos))
            images.append(idx)
            labels.append(dense + offset)
            offset += len(present)
        self.total_classes = offset
        self.owner = np.concatenate(owners).astype(np.int64)
        self.image = np.concatenate(images).astype(np.int64)
        self.label = np.concatenate(labels).astype(np.int64)
        if len(self.label) == 0:
            raise ValueError("Batch mode got no meta-train images; expected a non-empty view.")
        self.order, self.cursor = self.rng.permutation(len(self.label)), 0

    def _next_positions(self) -> np.ndarray:
        taken = []
        need = self.batch_size
        while need:
            if self.cursor == len(self.order):
                self.order, self.cursor = self.rng.permutation(len(self.label)), 0
            part = self.order[self.cursor:self.cursor + need]
            self.cursor += len(part)
            need -= len(part)
            taken.append(part)
        return np.concatenate(taken)

    def __call__(self, n: int) -> Iterator[list[torch.Tensor]]:
        for _ in range(n):
            pos = self._next_positions()
            grouped = pos[np.argsort(self.owner[pos], kind="stable")]
            parts = [(ds, self.image[grouped[self.owner[grouped] == i]])
                     for i, ds in enumerate(self.datasets)]
            x, y = materialize_batch(parts, self.label[grouped])
            inverse = np.argsort(np.argsort(self.owner[pos], kind="stable"), kind="stable")
            yield [x[torch.from_numpy(inverse)], y[torch.from_numpy(inverse)]]


def compute_total_classes(datasets: Mapping[str, Any] | Sequence[Any], views: Views = None) -> int:
    """Classes across all meta-train datasets that have at least one image in the view."""
    total = 0
    for ds in _sorted_datasets(datasets):
        allowed = _allowed(views, ds.name)
        labels = np.asarray(ds.labels) if allowed is None else np.asarray(ds.labels)[allowed]
        total += len(np.unique(labels))
    return total


def compute_train_classes(
    datasets: Mapping[str, Any] | Sequence[Any], config: SubmissionConfig, views: Views = None
) -> tuple[int | None, int]:
    """`(train_classes, total_classes)` for `MyMetaLearner`, as the NeurIPS'22 kit computes them:
    task mode: `train_config.N`, None when N is null (the kit passes `train_generator_config
    ["N"]` as it is); batch mode: total classes.

    Pass the meta-train generator's `datasets` (after `validation_datasets` moved some to
    validation): the kit counts only the datasets left for meta-training.
    """
    total = compute_total_classes(datasets, views)
    if config.train_data_format == "batch":
        return total, total
    train = config.train_config
    return train.N, total


def build_meta_train_generator(
    datasets: Mapping[str, Any] | Sequence[Any],
    config: SubmissionConfig,
    rng: np.random.Generator,
    views: Views = None,
) -> TaskGenerator | BatchGenerator:
    """The meta-train generator of `config.train_data_format` over `datasets` (restricted to
    `views`, dataset name -> allowed image indices, when given)."""
    ordered = _sorted_datasets(datasets)
    if config.train_data_format == "batch":
        return BatchGenerator(ordered, config.batch_size, rng, views)
    return TaskGenerator(ordered, config.train_config.to_task_shape(), rng, views)


def build_meta_valid_generator(
    datasets: Mapping[str, Any] | Sequence[Any],
    config: SubmissionConfig,
    rng: np.random.Generator,
    views: Views = None,
) -> TaskGenerator | None:
    """Tasks of `config.valid_config`, restarting on every call (module docstring), or None
    when the config asks no validation datasets (null or 0) or none are given (the kit's
    behaviour)."""
    ordered = _sorted_datasets(datasets)
    if not config.validation_datasets or not ordered:
        return None
    return TaskGenerator(ordered, config.valid_config.to_task_shape(), rng, views, restart=True)


def split_validation_datasets(
    train_names: Sequence[str], valid_names: Sequence[str], config: SubmissionConfig,
    rng: np.random.Generator,
) -> tuple[list[str], list[str]]:
    """Which datasets feed the meta-train and the meta-valid generator.

    `validation_datasets` null or 0: all of `train_names`, none for validation. Otherwise
    `validation_datasets` datasets, from the protocol's meta-valid view when it has some, else
    taken out of the meta-train datasets (the kit's behaviour); names drawn in sorted order.
    """
    train, valid = sorted(train_names), sorted(valid_names)
    n = config.validation_datasets
    if not n:  # null or 0: the kit's `validation_datasets is not None and > 0` is false
        return train, []
    source = valid if valid else train
    if not valid and n >= len(train):
        works = ("null (no meta-valid generator)" if len(train) < 2
                 else f"null, or 1 to {len(train) - 1}")
        raise ValueError(
            f"config.json validation_datasets={n} but the meta-train view has {len(train)} "
            f"dataset(s) and at least one must remain for meta-training; use {works} in "
            "config.json."
        )
    chosen = sorted(rng.choice(source, min(n, len(source)), replace=False).tolist())
    return ([t for t in train if t not in chosen] if not valid else train), chosen


def build_meta_generators(
    train_sets: Mapping[str, Any] | Sequence[Any],
    valid_sets: Mapping[str, Any] | Sequence[Any],
    config: SubmissionConfig,
    rng: np.random.Generator,
) -> tuple[TaskGenerator | BatchGenerator, TaskGenerator | None]:
    """The two generators of `meta_fit`, with `config.validation_datasets` applied on top of the
    protocol's views (`train_sets`: the meta-train view; `valid_sets`: the meta-valid view, e.g.
    within-domain's valid classes, or the collection's meta-valid datasets).

    `validation_datasets` null or 0: no meta-valid generator, whatever the view holds (the kit's
    contract). `n`: a generator over `n` datasets of the meta-valid view (all when it has fewer);
    when the protocol gives no meta-valid view, `n` datasets are taken out of the meta-train
    view instead, as the NeurIPS'22 kit does. The draw uses `rng` only when `n` is set.

    Raises:
        ValueError: `n` would take every meta-train dataset (see `split_validation_datasets`).
    """
    train, valid = _sorted_datasets(train_sets), _sorted_datasets(valid_sets)
    train_names, valid_names = split_validation_datasets(
        [ds.name for ds in train], [ds.name for ds in valid], config, rng)
    pool = {ds.name: ds for ds in (valid if valid else train)}
    chosen = [pool[name] for name in valid_names]
    kept = [ds for ds in train if ds.name in set(train_names)]
    return (build_meta_train_generator(kept, config, rng),
            build_meta_valid_generator(chosen, config, rng))
