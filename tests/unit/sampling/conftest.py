"""Fixtures of the sampler tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sampling_fakes import build_dataset

from submission_api.data.compiled import CompiledDataset


@pytest.fixture
def make_dataset() -> Callable[..., CompiledDataset]:
    return build_dataset
