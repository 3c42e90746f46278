"""The `platform` fixture: a real server, worker(s), Postgres, Redis and Docker sandbox."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from platform_support import (
    Platform,
    started_platform,
)


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    with started_platform(Platform, tmp_path_factory.mktemp("platform")) as platform:
        yield platform
