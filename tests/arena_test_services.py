"""How tests find their services and treat a missing one (importable by name from any test
folder)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

#: Written by scripts/test_postgres.sh: the tests' own cluster (ARENA_TEST_PG) and its binaries.
SERVICES_ENV = Path(__file__).resolve().parents[1] / ".arena" / "test-services.env"


def require_service(name: str, reason: str) -> None:
    """Skip outside CI; fail in CI, where a missing service is a broken setup, not an excuse."""
    if os.environ.get("CI"):
        pytest.fail(f"{name} is required in CI but unavailable: {reason}")
    pytest.skip(f"{name} unavailable: {reason}")


def load_services_env(path: Path = SERVICES_ENV) -> None:
    """Point the tests at the Postgres that scripts/services.sh set up, when the caller did not
    choose one (ARENA_TEST_PG): a direct `pytest` then finds what `scripts/test.sh` would. Its
    binaries' folder goes on PATH for the suites that start private clusters (initdb, pg_ctl)."""
    if not path.is_file():
        return
    values = dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    if "ARENA_TEST_PG" in values:
        os.environ.setdefault("ARENA_TEST_PG", values["ARENA_TEST_PG"])
    folder = values.get("ARENA_TEST_PG_BIN", "")
    if folder and folder not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([folder, os.environ.get("PATH", "")])


_REDIS_DB_LOCK: list[int] = []
"""The open lock file that holds this process's Redis database (kept for the process's life)."""


def claim_redis_database(base_url: str = "redis://127.0.0.1:6379", first: int = 1,
                         last: int = 15) -> None:
    """Give this test process a Redis database of its own (ARENA_TEST_REDIS), unless the caller
    chose one: two pytest processes on one host (xdist workers, two checkouts) whose platforms
    read queue `arena` on one database would take each other's jobs. A flock per database number
    under /tmp, held until the process exits, makes the choice exclusive on the host."""
    if "ARENA_TEST_REDIS" in os.environ:
        return
    for number in range(first, last + 1):
        fd = os.open(f"/tmp/arena-test-redis-db-{number}.lock", os.O_CREAT | os.O_RDWR, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        _REDIS_DB_LOCK.append(fd)
        os.environ["ARENA_TEST_REDIS"] = f"{base_url}/{number}"
        return
    raise RuntimeError(f"every Redis database {first}..{last} is held by another test process "
                       "(/tmp/arena-test-redis-db-*.lock): set ARENA_TEST_REDIS to choose one")


def release_redis_database() -> None:
    """Give back this process's claim (an xdist controller, which runs no test: its workers,
    started after this, inherit its environment and would otherwise all share its database
    instead of claiming their own)."""
    while _REDIS_DB_LOCK:
        os.close(_REDIS_DB_LOCK.pop())
        os.environ.pop("ARENA_TEST_REDIS", None)
