"""Fixtures shared by every test tier: a tiny generated Meta-Album collection and its cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from arena_test_services import load_services_env

from starting_kit.sample_data import generate_collection

# At import, not in pytest_configure: the conftests of the folders named on the command line
# (tests/e2e/conftest.py imports platform_support, which reads ARENA_TEST_PG) are imported right
# after this one, before any hook runs.
load_services_env()
# The tests' own secrets (issue 20): `arena serve` refuses the placeholder, and the test-seed
# secret has no fallback. Subprocess servers and workers inherit them.
os.environ.setdefault("ARENA_SECRET_KEY", "tests-only-secret-key-0123456789abcdef0123456789")
os.environ.setdefault("ARENA_TEST_SEED_SECRET", "tests-only-test-seed-secret-0123456789abcdef01")


@pytest.fixture(scope="session")
def tiny_collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """6 classes x 25 images per domain: enough for any-way any-shot tasks, quick to build."""
    return generate_collection(tmp_path_factory.mktemp("data") / "tiny", n_classes=6, n_images=25)


@pytest.fixture(scope="session")
def arena_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")
