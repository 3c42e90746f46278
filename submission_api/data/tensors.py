"""Turning compiled pixels into the tensors participant code receives.

This sits on the hot path of every task: one fused numpy pass that reads the uint8 pixels in
channel-first order, divides by 255 in float32 and writes a fresh contiguous buffer, which
`torch.from_numpy` then wraps without copying. Measured faster than the torch
`permute(...).float().div_(255)` chain, mostly because numpy's allocator backs large buffers
with huge pages (fewer page faults on a fresh 60 MB task); the values are bitwise the same.
"""

from __future__ import annotations

import numpy as np
import torch

from submission_api.data.compiled import IMAGE_SHAPE


def images_to_tensor(images: np.ndarray) -> torch.Tensor:
    """uint8 `[n, 128, 128, 3]` -> contiguous float32 `[n, 3, 128, 128]` in [0, 1].

    Raises:
        ValueError: `images` is not uint8 of shape `[n, 128, 128, 3]`.
    """
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[1:] != IMAGE_SHAPE:
        raise ValueError(f"expected uint8 images [n, 128, 128, 3], got {images.dtype} "
                         f"{list(images.shape)}; index a CompiledDataset's `images` to get them.")
    out = np.empty((len(images), 3, *IMAGE_SHAPE[:2]), dtype=np.float32)
    np.divide(images.transpose(0, 3, 1, 2), np.float32(255), out=out, dtype=np.float32)
    return torch.from_numpy(out)
