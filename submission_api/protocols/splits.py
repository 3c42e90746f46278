"""Phase-level splits that views and test episodes must agree on: the within-domain class split
(NeurIPS'21) and the id-ood held-out images (Setlur et al. 2021).

Both depend only on `ProtocolParams.split_seed` and the dataset name, never on the run seed: the
meta-train view, the meta-valid view and every run's test episodes see the same split.
"""

from __future__ import annotations

import math

import numpy as np

from submission_api.sampling.pools import compute_class_members
from submission_api.sampling.seeds import make_rng


def _round_half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


def compute_within_domain_split(
    n_classes: int, fractions: tuple[float, float, float], split_seed: int, dataset: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split class ids `0..n_classes-1` into sorted, disjoint (train, valid, test) arrays.

    Counts: test = max(1, round(f_test * C)), valid = round(f_valid * C) (at least 1 when
    f_valid > 0), train = the rest. Which classes: a permutation drawn from
    `make_rng(split_seed, "within-domain", dataset)`.

    Raises:
        ValueError: the split leaves no training class.
    """
    _, f_valid, f_test = fractions
    n_test = max(1, _round_half_up(f_test * n_classes))
    n_valid = max(1 if f_valid > 0 else 0, _round_half_up(f_valid * n_classes))
    n_train = n_classes - n_test - n_valid
    if n_train < 1:
        raise ValueError(
            f"Dataset {dataset!r} has {n_classes} classes, split {fractions} leaves {n_train} "
            "training classes; expected at least 1; use a dataset with more classes."
        )
    order = make_rng(split_seed, "within-domain", dataset).permutation(n_classes)
    parts = (order[:n_train], order[n_train:n_train + n_valid], order[n_train + n_valid:])
    train, valid, test = (np.sort(p).astype(np.int64) for p in parts)
    return train, valid, test


def compute_images_of_classes(labels: np.ndarray, class_ids: np.ndarray) -> np.ndarray:
    """Sorted image indices whose label is in `class_ids`."""
    return np.flatnonzero(np.isin(np.asarray(labels), class_ids)).astype(np.int64)


def compute_held_out_images(
    labels: np.ndarray, n_classes: int, fraction: float, split_seed: int, dataset: str
) -> np.ndarray:
    """The id-ood held-out images of every class: round(fraction * n_c) of each class, kept
    between 0 and n_c - 1 so every class keeps a meta-train image; drawn from
    `make_rng(split_seed, "id-ood", dataset)`, classes in id order.

    Returns:
        Sorted int64 image indices, never in the meta-train view.
    """
    rng = make_rng(split_seed, "id-ood", dataset)
    held = []
    for members in compute_class_members(labels, n_classes):
        count = min(max(len(members) - 1, 0), _round_half_up(fraction * len(members)))
        held.append(rng.permutation(members)[:count])
    return np.sort(np.concatenate(held)).astype(np.int64) if held else np.empty(0, np.int64)
