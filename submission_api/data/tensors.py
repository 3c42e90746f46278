"""Turning compiled pixels into the tensors participant code receives.

This sits on the hot path of every task: one `torch.from_numpy`, one permuting copy into a
contiguous float32 buffer, one in-place scale; no per-image Python work.
"""

from __future__ import annotations

import warnings

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
    with warnings.catch_warnings():
        # Memmap slices are read-only; torch warns about that although we only read them.
        warnings.simplefilter("ignore", UserWarning)
        source = torch.from_numpy(np.ascontiguousarray(images))
    out = torch.empty((len(images), 3, *IMAGE_SHAPE[:2]), dtype=torch.float32)
    out.copy_(source.permute(0, 3, 1, 2))
    return out.div_(255.0)
