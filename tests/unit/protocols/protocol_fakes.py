"""Tiny in-memory collections for protocol tests (labels and attributes only; 1x1 images).

A uniquely named module (not conftest) so that tests and subprocesses can import it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from submission_api.data.collection import Collection
from submission_api.data.compiled import CompiledDataset


def build_dataset(name: str, class_sizes: Sequence[int], super_categories=None,
                  attributes: Sequence[frozenset[str]] | None = None) -> CompiledDataset:
    """Labels in class order (image i of class c at rank r: attributes[i] by the caller)."""
    labels = np.repeat(np.arange(len(class_sizes)), class_sizes).astype(np.int64)
    return CompiledDataset(
        name=name, root=Path("/nonexistent") / name, content_hash=f"hash-{name}",
        images=np.zeros((len(labels), 1, 1, 3), dtype=np.uint8), labels=labels,
        class_names=tuple(f"c{i:03d}" for i in range(len(class_sizes))),
        super_categories=None if super_categories is None else np.asarray(super_categories),
        attributes=None if attributes is None else tuple(attributes),
    )


def build_attributes(n_classes: int, per_class: int) -> list[frozenset[str]]:
    """Class c, image rank r: a{c + r % 4} alone when r % 4 < 3, none otherwise. Class c is
    FewSTAB-eligible for a{c}, a{c+1}, a{c+2} exactly; the support images of each carry it alone
    and the queries of one carry another, as the reference's rules ask."""
    return [frozenset({f"a{(c + r % 4) % n_classes}"}) if r % 4 < 3 else frozenset()
            for c in range(n_classes) for r in range(per_class)]


def build_collection() -> Collection:
    datasets = {
        "tr1": build_dataset("tr1", [40] * 6),
        "tr2": build_dataset("tr2", [40] * 5),
        "va1": build_dataset("va1", [40] * 5),
        "te1": build_dataset("te1", [40] * 30, super_categories=[0, 1, 2] * 10),
        "te2": build_dataset("te2", [160] * 8, attributes=build_attributes(8, 160)),
    }
    splits = {"meta-train": ["tr1", "tr2"], "meta-valid": ["va1"], "meta-test": ["te1", "te2"]}
    return Collection(name="tiny", datasets=datasets, splits=splits)
