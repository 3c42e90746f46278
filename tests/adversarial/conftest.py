"""Fixtures of the adversarial suite: one isolated real platform per module (server process on a
throwaway Postgres database, a Celery worker on Redis with a private queue, Docker sandbox)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path[:0] = [str(Path(__file__).resolve().parent),
                str(Path(__file__).resolve().parents[1] / "e2e")]

from hardening_support import IsolatedPlatform, new_platform  # noqa: E402 - path above
from platform_support import require_redis_and_docker, throwaway_database  # noqa: E402


@pytest.fixture(scope="module")
def hardened_platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IsolatedPlatform]:
    require_redis_and_docker()
    with throwaway_database(migrated=True) as url:
        platform = new_platform(tmp_path_factory.mktemp("adversarial"), url)
        try:
            platform.start_server()
            yield platform
        finally:
            platform.stop()
