"""Conv4 reports the feature size it produces, downsamples its input first, and refuses sizes
that would shrink below one pixel."""

from __future__ import annotations

import pytest
import torch

from submission_api.backbones import Conv4, downsample


@pytest.mark.parametrize(
    ("width", "depth", "factor", "size", "expected"),
    [(32, 4, 4, 128, 128), (16, 3, 8, 128, 64), (8, 4, 1, 32, 32), (4, 2, 2, 16, 16)],
)
def test_conv4_out_features_matches_its_output(
    width: int, depth: int, factor: int, size: int, expected: int
) -> None:
    torch.manual_seed(0)
    network = Conv4(width=width, depth=depth, downsample_factor=factor, image_size=size)
    features = network(torch.rand(3, 3, size, size))
    assert network.out_features == expected
    assert features.shape == (3, expected)


def test_conv4_refuses_an_input_that_would_vanish() -> None:
    with pytest.raises(ValueError, match="downsample_factor"):
        Conv4(depth=4, downsample_factor=16, image_size=128)


def test_downsample_averages_blocks_and_factor_one_is_identity() -> None:
    images = torch.arange(16.0).view(1, 1, 4, 4)
    assert downsample(images, 1) is images
    assert downsample(images, 2).flatten().tolist() == [2.5, 4.5, 10.5, 12.5]


def test_conv4_is_trainable_end_to_end() -> None:
    torch.manual_seed(0)
    network = Conv4(width=4)
    network(torch.rand(2, 3, 128, 128)).sum().backward()
    assert all(p.grad is not None for p in network.parameters())
