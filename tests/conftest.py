"""Fixtures shared by every test tier: a tiny generated Meta-Album collection and its cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from starting_kit.sample_data import generate_collection


@pytest.fixture(scope="session")
def tiny_collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """6 classes x 25 images per domain: enough for any-way any-shot tasks, quick to build."""
    return generate_collection(tmp_path_factory.mktemp("data") / "tiny", n_classes=6, n_images=25)


@pytest.fixture(scope="session")
def arena_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")
