"""Small pure-torch backbones that submissions may import (`from submission_api.backbones import
Conv4`). They exist so that the starting kit's baselines share one feature extractor, and so that
a participant has a CPU-friendly starting point: images arrive as float32 `[n, 3, 128, 128]`, and
average-pooling them to 32x32 first cuts the cost of every later layer sixteen-fold.

Conv4 is the four-block network of Vinyals et al. 2016 (Matching Networks) and Snell et al. 2017
(Prototypical Networks): each block is a 3x3 convolution, batch norm, ReLU and 2x2 max-pooling.
"""

from __future__ import annotations

from itertools import pairwise

import torch
import torch.nn.functional as F
from torch import nn


def downsample(images: torch.Tensor, factor: int) -> torch.Tensor:
    """Average-pool images by `factor` (`[n, c, h, w]` -> `[n, c, h/factor, w/factor]`).

    A factor of 1 returns the images unchanged.
    """
    if factor == 1:
        return images
    return F.avg_pool2d(images, factor)


def conv_block(in_channels: int, out_channels: int) -> nn.Sequential:
    """3x3 convolution, batch norm, ReLU, 2x2 max-pooling: halves the spatial size."""
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
    )


class Conv4(nn.Module):
    """Conv4 feature extractor with optional input downsampling.

    Args:
        width: channels of every block (64 in the papers; 32 keeps CPU runs fast).
        depth: number of blocks (4 in the papers).
        downsample_factor: average-pooling factor applied to the input first (4: 128 -> 32).
        image_size: side of the input images, to compute `out_features`.
        in_channels: channels of the input images.

    `forward` maps `[n, in_channels, image_size, image_size]` to `[n, out_features]`.
    """

    def __init__(
        self,
        width: int = 32,
        depth: int = 4,
        downsample_factor: int = 4,
        image_size: int = 128,
        in_channels: int = 3,
    ) -> None:
        super().__init__()
        side = image_size // downsample_factor
        if side < 2**depth:
            raise ValueError(
                f"Conv4 got image_size={image_size}, downsample_factor={downsample_factor} and "
                f"depth={depth}: the {side}x{side} input would shrink below 1x1; use a smaller "
                "downsample_factor or depth."
            )
        channels = [in_channels] + [width] * depth
        self.downsample_factor = downsample_factor
        self.blocks = nn.Sequential(*(conv_block(a, b) for a, b in pairwise(channels)))
        self.out_features = width * (side // 2**depth) ** 2

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.blocks(downsample(images, self.downsample_factor)).flatten(1)
