"""Fixtures for server integration tests: real Postgres (one throwaway database per session,
migrated with Alembic, emptied before each test) for every test, and SQLite (a migrated template
file copied per test) as well for the tests that race requests or lock rows (`backends`).
Without Postgres the tests skip locally but FAIL when CI is set.

Emptying is one round trip of DELETEs (children before parents) and a reset of every sequence:
~12 ms, where the TRUNCATE it replaces took ~0.35 s a test (TRUNCATE rewrites each table's files
and catalog entries). The app keeps its own engine and real connections, as in production: the
tests that race threads on the quota or lock rows see the real engine. (A rolled-back transaction
per test was tried and rejected: a request's auth session is closed after the write session it
encloses, and rolling back the outer savepoint discards the inner commit.)
"""

from __future__ import annotations

import inspect
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator
from graphlib import TopologicalSorter
from pathlib import Path

import pytest
import sqlalchemy
from _server_support import Clock, Env
from fastapi.testclient import TestClient
from job_queue_fake import RecordingJobQueue

from server.app import create_app
from server.core.config import Settings
from server.core.db import upgrade_database

PG_ADMIN_URL = os.environ.get("ARENA_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
_FOREIGN_KEYS = """
SELECT c.conrelid::regclass::text, c.confrelid::regclass::text FROM pg_constraint c
WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace"""
_TABLES = """
SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'alembic_version'"""
_RESTART_SEQUENCES = """
SELECT setval(c.oid, 1, false) FROM pg_class c
WHERE c.relkind = 'S' AND c.relnamespace = 'public'::regnamespace"""


def _unavailable(what: str, exc: Exception) -> None:
    message = f"{what} is not reachable ({exc}); start it or unset CI to skip"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


class PostgresDatabase:
    """The session's database with one engine of its own, for emptying it between tests."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = sqlalchemy.create_engine(url, pool_size=1)
        with self.engine.connect() as conn:
            tables = conn.exec_driver_sql(_TABLES).scalars().all()
            graph: dict[str, set[str]] = {t: set() for t in tables}
            for child, parent in conn.exec_driver_sql(_FOREIGN_KEYS):
                if child != parent:  # a self-reference empties in one statement
                    graph[parent].add(child)  # the parent waits for its children
        order = list(TopologicalSorter(graph).static_order())
        self._empty = "; ".join([f'DELETE FROM "{t}"' for t in order] + [_RESTART_SEQUENCES])

    def empty(self) -> None:
        """Every table emptied and every id restarted at 1, as TRUNCATE ... RESTART IDENTITY."""
        with self.engine.begin() as conn:
            conn.exec_driver_sql(self._empty)


@pytest.fixture(scope="session")
def pg_database() -> Iterator[PostgresDatabase]:
    """A fresh migrated Postgres database for this test session, dropped afterwards."""
    try:
        import psycopg

        admin = psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=3)
    except Exception as exc:  # noqa: BLE001 - any connection failure means "no Postgres"
        _unavailable("Postgres", exc)
    name = f"arena_test_{uuid.uuid4().hex[:12]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    url = f"{url}/{name}"
    database = None
    try:
        upgrade_database(url)
        database = PostgresDatabase(url)
        yield database
    finally:
        if database is not None:
            database.engine.dispose()
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture(scope="session")
def pg_url(pg_database: PostgresDatabase) -> str:
    return pg_database.url


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sqlite-template") / "arena.db"
    upgrade_database(f"sqlite:///{path}")
    return path


RACING = re.compile(r"\b(threading|Barrier|ThreadPoolExecutor|concurrent\.futures|"
                    r"with_for_update)\b")
"""What in a test's body says it races requests or takes a lock: such a test runs on both
backends, whose locks differ (SQLite's BEGIN IMMEDIATE, Postgres's row locks)."""


def backends(function: Callable[..., object], marked: bool) -> list[str]:
    """Postgres (the scaled deployment, whose types and constraints are the stricter) for every
    test; SQLite as well where a race or a lock is tested (`RACING`, or marked `both_backends`),
    or for every test with ARENA_TEST_BACKENDS=both (the full matrix, twice the time)."""
    if os.environ.get("ARENA_TEST_BACKENDS") == "both" or marked:
        return ["sqlite", "postgres"]
    try:
        source = inspect.getsource(function)
    except (OSError, TypeError):
        source = ""
    return ["sqlite", "postgres"] if RACING.search(source) else ["postgres"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "database_url" in metafunc.fixturenames:
        marked = metafunc.definition.get_closest_marker("both_backends") is not None
        metafunc.parametrize("database_url", backends(metafunc.function, marked), indirect=True)


@pytest.fixture
def database_url(request, tmp_path) -> str:
    """Each test gets an empty migrated database, on the backends `backends` gives it."""
    if request.param == "sqlite":
        target = tmp_path / "db" / "arena.db"
        target.parent.mkdir()
        shutil.copy(request.getfixturevalue("sqlite_template"), target)
        return f"sqlite:///{target}"
    database: PostgresDatabase = request.getfixturevalue("pg_database")
    database.empty()
    return database.url


@pytest.fixture
def env(database_url, tmp_path):
    settings = Settings(data_dir=tmp_path / "data", database_url=database_url,
                        auto_migrate=False, reconcile_interval_s=0, lease_seconds=60,
                        max_platform_failures=3, requeue_after_s=600)
    queue, clock = RecordingJobQueue(), Clock()
    app = create_app(settings, queue=queue, clock=clock)
    with TestClient(app) as client:
        yield Env(client=client, db=app.state.db, queue=queue, clock=clock, settings=settings)
