"""Fixtures of the fuzz suite: the real app in process on a throwaway SQLite database."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from inprocess_support import InProcess, inprocess_app  # noqa: E402 - needs the path above

# Small bounds, so that a bomb or an oversized upload costs milliseconds, not gigabytes.
LIMITS = {"max_upload_bytes": 4 * 1024**2, "max_uncompressed_bytes": 8 * 1024**2,
          "max_zip_files": 200}


@pytest.fixture(scope="module")
def app_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with inprocess_app(tmp_path_factory.mktemp("fuzz"), **LIMITS) as env:
        yield env
