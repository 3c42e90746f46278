"""Tiny in-memory CompiledDatasets for sampler tests (no files, a few hundred images).

A uniquely named module (not conftest) so that tests and subprocesses can import it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from submission_api.data.compiled import CompiledDataset


def build_dataset(
    name: str,
    class_sizes: Sequence[int],
    super_categories: Sequence[int] | None = None,
    attributes: Sequence[frozenset[str]] | None = None,
) -> CompiledDataset:
    """Labels interleaved by a fixed permutation; image i has pixel (0,0) = (i % 256, i // 256)."""
    labels = np.repeat(np.arange(len(class_sizes)), class_sizes).astype(np.int64)
    labels = labels[np.random.default_rng(12345).permutation(len(labels))]
    images = np.zeros((len(labels), 128, 128, 3), dtype=np.uint8)
    images[:, 0, 0, 0] = np.arange(len(labels)) % 256
    images[:, 0, 0, 1] = np.arange(len(labels)) // 256
    return CompiledDataset(
        name=name,
        root=Path("/nonexistent") / name,
        content_hash=f"hash-{name}",
        images=images,
        labels=labels,
        class_names=tuple(f"c{i:03d}" for i in range(len(class_sizes))),
        super_categories=None if super_categories is None else np.asarray(super_categories),
        attributes=None if attributes is None else tuple(attributes),
    )
