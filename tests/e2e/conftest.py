"""The `platform` fixture: a real server, worker(s), Postgres, Redis and Docker sandbox."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from platform_support import (
    Platform,
    started_platform,
)


@pytest.fixture(scope="module")
def platform(request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    """One platform per module; its workers reset the host's dentries before each run only
    where the module says `RESET_DENTRIES = True` (`Platform.reset_dentries` says why)."""
    with started_platform(Platform, tmp_path_factory.mktemp("platform")) as platform:
        platform.reset_dentries = bool(getattr(request.module, "RESET_DENTRIES", False))
        yield platform
