"""The few-shot task handed to participant code, with the NeurIPS'22 starting kit's attribute
names (`num_ways`, `num_shots`, `support_set`, `query_set`, `original_class_idx`, `dataset`).

Inside the project the same quantities are called `n_ways`, `n_shots` and `n_queries`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class Task:
    """One N-way k-shot task.

    `support_set` and `query_set` are `(X, y, original_y)`: X float32 `[n, 3, 128, 128]` in
    [0, 1], y int64 `[n]` in `0..num_ways-1`, original_y int64 `[n]`. At meta-test, query
    labels are not handed out and `original_y` carries no dataset class ids (they would leak
    class identity): both are then the task-local labels or absent.
    """

    num_ways: int
    num_shots: int
    support_set: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    query_set: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    original_class_idx: np.ndarray
    dataset: str | None = None
