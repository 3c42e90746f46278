"""Fixtures of the data-layer tests: one tiny dataset and an empty cache folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from data_fakes import write_dataset


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return write_dataset(tmp_path / "src" / "tiny")


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"
