"""Fixtures of the fault-injection suite: a real platform on PRIVATE services — its own
redis-server and its own Postgres cluster on free ports — so that restarting or stopping them
never touches the shared services other tests use."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "adversarial"),
                str(Path(__file__).resolve().parents[1] / "e2e")]

from hardening_support import (  # noqa: E402 - needs the path above
    IsolatedPlatform,
    PrivatePostgres,
    PrivateRedis,
    new_platform,
)
from platform_support import require_redis_and_docker  # noqa: E402


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    root = tmp_path_factory.mktemp("services")
    redis, postgres = PrivateRedis(root), PrivatePostgres()
    redis.start()
    require_redis_and_docker(redis.url)
    postgres.init()
    try:
        yield {"redis": redis, "postgres": postgres}
    finally:
        redis.stop()
        postgres.remove()


@pytest.fixture(scope="module")
def faulty_platform(services: dict, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[IsolatedPlatform]:
    import psycopg

    # The cluster is private and deleted afterwards: no need to drop the database.
    with psycopg.connect(services["postgres"].admin_url, autocommit=True) as admin:
        admin.execute('CREATE DATABASE "arena_faults"')
    url = services["postgres"].admin_url.replace("postgresql://", "postgresql+psycopg://")
    platform = new_platform(
        tmp_path_factory.mktemp("faults"), url.rsplit("/", 1)[0] + "/arena_faults",
        broker_url=services["redis"].url,
        extra_server_env={"ARENA_REQUEUE_AFTER_S": "20", "ARENA_MAX_PLATFORM_FAILURES": "3",
                          # a queued run missing from the broker (the restarted one) is resent
                          # after two passes once it is this old: 20 s before, when the slow run
                          # ahead of it outlasted that; with a shorter slow run the lost ones
                          # would wait for it on an idle worker. Far above an enqueue's delay
                          # after its commit (a resend is harmless anyway: a fresh token)
                          "ARENA_LOST_AFTER_S": "10",
                          # beyond the outages (a killed server's restart, a stopped Postgres)
                          # that the workers' calls retry through (`WORKER_ENV`): a run lives
                          # through them as intended, not lost and run again when the host is
                          # slow to bring the server back (15 s, the e2e platforms', was)
                          "ARENA_LEASE_SECONDS": "45"})
    try:
        platform.start_server()
        yield platform
    finally:
        platform.stop()
