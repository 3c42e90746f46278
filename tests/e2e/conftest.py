"""The `platform` fixture: a real server, worker(s), Postgres, Redis and Docker sandbox."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from platform_support import (
    Platform,
    free_port,
    require_redis_and_docker,
    throwaway_database,
)


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    require_redis_and_docker()
    with throwaway_database() as url:
        platform = Platform(root=tmp_path_factory.mktemp("platform"), database_url=url,
                            base_url=f"http://127.0.0.1:{free_port()}",
                            admin_token=secrets.token_urlsafe(24))
        try:
            platform.start_server()
            yield platform
        finally:
            platform.stop()
