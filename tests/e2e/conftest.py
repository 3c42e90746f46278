"""The `platform` fixture: a real server, worker(s), Postgres, Redis and Docker sandbox."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator

import pytest
from arena_test_services import require_service
from platform_support import PG_ADMIN_URL, REDIS_URL, SANDBOX_IMAGE, Platform, free_port


def _throwaway_database() -> tuple[str, object, str]:
    try:
        import psycopg

        admin = psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=3)
    except Exception as error:  # noqa: BLE001 - any failure means no Postgres
        require_service("Postgres", str(error))
    name = f"arena_e2e_{uuid.uuid4().hex[:10]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    return f"{base}/{name}", admin, name


def _require_redis_and_docker() -> None:
    try:
        import redis

        redis.Redis.from_url(REDIS_URL, socket_timeout=3).flushdb()
    except Exception as error:  # noqa: BLE001
        require_service("Redis", str(error))
    try:
        import docker

        docker.from_env().images.get(SANDBOX_IMAGE)
    except Exception as error:  # noqa: BLE001
        require_service("Docker sandbox image", f"{error}; run scripts/services.sh")


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    _require_redis_and_docker()
    url, admin, name = _throwaway_database()
    platform = Platform(root=tmp_path_factory.mktemp("platform"), database_url=url,
                        base_url=f"http://127.0.0.1:{free_port()}",
                        admin_token=secrets.token_urlsafe(24))
    try:
        platform.start_server()
        yield platform
    finally:
        platform.stop()
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()
