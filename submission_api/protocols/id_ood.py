"""Which images the id-ood protocol (Setlur et al. 2021, "Two sides of meta-learning evaluation:
in vs. out of distribution") tests as BaseGen, ValGen and NovelGen, and which the participant
meta-trains and meta-validates on. Two variants (`ProtocolParams.id_ood_novel`), named by the
shift NovelGen measures:
  - "cross-dataset" (default): BaseGen on the held-out images of the meta-train datasets' classes,
    ValGen on the meta-valid datasets, NovelGen on the meta-test datasets — novel *datasets*.
  - "same-benchmark", the paper's setting: the classes of each meta-train dataset are split by
    `split_fractions` (train / valid / test, as miniImageNet's 64 / 16 / 20) under `split_seed`;
    meta-training sees the train classes without their held-out images, BaseGen tests those
    held-out images, ValGen and the meta-valid view use the valid classes, NovelGen the test
    classes — novel classes of the same benchmark. The meta-valid and meta-test datasets are
    not used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from submission_api.protocols.params import SAME_BENCHMARK_SPLIT, ProtocolParams
from submission_api.protocols.splits import (
    compute_held_out_images,
    compute_images_of_classes,
    compute_within_domain_split,
)

if TYPE_CHECKING:
    from submission_api.data.collection import Collection

Group = tuple[str, str, np.ndarray | None]
"""(report group, dataset name, the dataset's images the group may use; None: all)."""


def _get(collection: Collection, name: str):
    if name not in collection.datasets:
        raise ValueError(
            f"Dataset {name!r} is not in collection {collection.name!r} (has "
            f"{sorted(collection.datasets)}); fix the phase's datasets or meta_splits.txt."
        )
    return collection.datasets[name]


def _parts(params: ProtocolParams, collection: Collection, name: str) -> dict[str, np.ndarray]:
    """A meta-train dataset's images: 'train' (the meta-train view), 'BaseGen', and in the
    same-benchmark variant 'ValGen' and 'NovelGen'."""
    ds = _get(collection, name)
    held = compute_held_out_images(ds.labels, len(ds.class_names), params.held_out_fraction,
                                   params.split_seed, name)
    if params.id_ood_novel != "same-benchmark":
        every = np.arange(len(ds.labels), dtype=np.int64)
        return {"train": np.setdiff1d(every, held), "BaseGen": held}
    train_c, valid_c, test_c = compute_within_domain_split(
        len(ds.class_names), params.classes_split, params.split_seed, name)
    check_novel_classes(params, name, len(ds.class_names), len(valid_c), len(test_c))
    base = compute_images_of_classes(ds.labels, train_c)
    held = np.intersect1d(held, base)
    return {"train": np.setdiff1d(base, held), "BaseGen": held,
            "ValGen": compute_images_of_classes(ds.labels, valid_c),
            "NovelGen": compute_images_of_classes(ds.labels, test_c)}


def check_novel_classes(params: ProtocolParams, name: str, n_classes: int, n_valid: int,
                        n_test: int) -> None:
    """Raise a clear error when the same-benchmark class split leaves fewer ValGen or NovelGen
    classes than a task has ways: more shots or queries cannot be asked away, only classes."""
    n_ways = params.shape[0]
    if n_test >= n_ways and (n_valid == 0 or n_valid >= n_ways):
        return
    fractions = params.classes_split

    def counts(c: int, split: tuple[float, float, float]) -> tuple[int, int, int]:
        parts = compute_within_domain_split(c, split, params.split_seed, name)
        return len(parts[0]), len(parts[1]), len(parts[2])

    need = next((c for c in range(n_ways, 100_000)
                 if min(counts(c, fractions)[2], counts(c, fractions)[1] or n_ways) >= n_ways),
                None)
    wide = counts(n_classes, SAME_BENCHMARK_SPLIT)
    raise ValueError(
        f"Dataset {name!r} (id-ood same-benchmark): split_fractions {list(fractions)} of its "
        f"{n_classes} classes leave {n_valid} ValGen classes (the valid share) and {n_test} "
        f"NovelGen classes (the test share), expected at least n_ways={n_ways} in each (a "
        f"{n_ways}-way task needs {n_ways} classes; fewer shots or queries cannot help). Fix: "
        f"raise the valid and test shares (split_fractions: {list(SAME_BENCHMARK_SPLIT)} gives "
        f"{wide[0]}/{wide[1]}/{wide[2]} classes here), use meta-train datasets of at least "
        f"{need} classes under {list(fractions)}, or lower n_ways."
    )


def plan_id_ood_groups(params: ProtocolParams, collection: Collection) -> list[Group]:
    """The test groups in plan order: BaseGen of every meta-train dataset, then ValGen, then
    NovelGen (`params.datasets`, when given, names the cross-dataset NovelGen datasets)."""
    train = list(collection.splits.get("meta-train", []))
    parts = {name: _parts(params, collection, name) for name in train}
    groups: list[Group] = [("BaseGen", name, parts[name]["BaseGen"]) for name in train]
    if params.id_ood_novel == "same-benchmark":
        for group in ("ValGen", "NovelGen"):
            groups += [(group, name, parts[name][group]) for name in train
                       if parts[name][group].size]
        return groups
    groups += [("ValGen", name, None) for name in collection.splits.get("meta-valid", [])]
    novel = list(params.datasets) if params.datasets else list(
        collection.splits.get("meta-test", []))
    return groups + [("NovelGen", name, None) for name in novel]


def plan_id_ood_view(params: ProtocolParams, collection: Collection,
                     part: str) -> dict[str, np.ndarray]:
    """Meta-train ('train') or meta-valid ('valid') view: dataset name -> image indices."""
    if part == "train":
        return {name: _parts(params, collection, name)["train"]
                for name in collection.splits.get("meta-train", [])}
    if params.id_ood_novel != "same-benchmark":
        return {name: np.arange(len(_get(collection, name).labels), dtype=np.int64)
                for name in collection.splits.get("meta-valid", [])}
    views = {name: _parts(params, collection, name)["ValGen"]
             for name in collection.splits.get("meta-train", [])}
    return {name: images for name, images in views.items() if images.size}
