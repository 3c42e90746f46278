"""Turn index-level episodes and batches into the tensors participant code receives.

This is the one place of `sampling/` that reads pixels. Images are float32 `[n, 3, 128, 128]`
in [0, 1], labels int64 (DESIGN.md, 'The participant contract').
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from submission_api.data.tensors import images_to_tensor
from submission_api.sampling.episode import Episode
from submission_api.task import Task


def _gather(images: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """`images[idx]`, reading a memory map in ascending index order (one pass over the file)."""
    order = np.argsort(idx, kind="stable")
    out = np.empty((len(idx),) + tuple(images.shape[1:]), dtype=images.dtype)
    out[order] = images[idx[order]]
    return out


def materialize_task(episode: Episode, dataset: Any, *, hide_class_ids: bool = False) -> Task:
    """Build the participant-facing Task of `episode` from `dataset.images`.

    Args:
        dataset: a CompiledDataset (or anything with `images` uint8 `[n, 128, 128, 3]`).
        hide_class_ids: meta-test: `original_y` becomes the task labels, `original_class_idx`
            `0..N-1` and `dataset` None, so no dataset class id leaks (DESIGN.md).

    Returns:
        Task with X float32 `[n, 3, 128, 128]`, y int64 in `0..N-1`, original_y int64 (dataset
        class ids at meta-train).
    """
    class_ids = np.arange(episode.n_ways) if hide_class_ids else episode.class_ids

    def part(idx: np.ndarray,
             labels: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = images_to_tensor(_gather(dataset.images, idx))
        y = torch.from_numpy(labels.astype(np.int64))
        return x, y, torch.from_numpy(class_ids[labels].astype(np.int64))

    return Task(
        num_ways=episode.n_ways,
        num_shots=episode.n_shots,
        support_set=part(episode.support_idx, episode.support_labels),
        query_set=part(episode.query_idx, episode.query_labels),
        original_class_idx=np.asarray(class_ids, dtype=np.int64),
        dataset=None if hide_class_ids else episode.dataset,
    )


def materialize_batch(
    parts: Sequence[tuple[Any, np.ndarray]], labels: np.ndarray
) -> list[torch.Tensor]:
    """Build a batch-mode `[X, y]` from `(dataset, image indices)` parts.

    Args:
        parts: images are taken in order, part after part.
        labels: int64 `[n]`, one per image in that order (global class ids).

    Returns:
        `[X float32 [n, 3, 128, 128], y int64 [n]]`.
    """
    chunks = [_gather(ds.images, np.asarray(idx, dtype=np.int64)) for ds, idx in parts if len(idx)]
    total = sum(len(c) for c in chunks)
    if total != len(labels):
        raise ValueError(
            f"Batch of {total} images got {len(labels)} labels; expected one label per image."
        )
    return [images_to_tensor(np.concatenate(chunks)), torch.from_numpy(labels.astype(np.int64))]
