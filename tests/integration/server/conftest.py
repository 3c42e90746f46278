"""Fixtures for server integration tests: real Postgres (a throwaway database per session,
migrated with Alembic, truncated between tests) and SQLite (a migrated template file copied
per test). Without Postgres the tests skip locally but FAIL when CI is set."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest
from _server_support import Clock, Env
from fastapi.testclient import TestClient
from job_queue_fake import RecordingJobQueue

from server.app import create_app
from server.core.config import Settings
from server.core.db import upgrade_database

PG_ADMIN_URL = os.environ.get("ARENA_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
TABLES = ("login_attempts, task_results, runs, submissions, participations, datasets, phases, "
          "competitions, audit_log, api_tokens, users")


def _unavailable(what: str, exc: Exception) -> None:
    message = f"{what} is not reachable ({exc}); start it or unset CI to skip"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def pg_url():
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
    try:
        upgrade_database(url)
        yield url
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sqlite-template") / "arena.db"
    upgrade_database(f"sqlite:///{path}")
    return path


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request, tmp_path) -> str:
    """Each test gets an empty migrated database, on both backends."""
    if request.param == "sqlite":
        target = tmp_path / "db" / "arena.db"
        target.parent.mkdir()
        shutil.copy(request.getfixturevalue("sqlite_template"), target)
        return f"sqlite:///{target}"
    url = request.getfixturevalue("pg_url")
    import sqlalchemy

    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE")
    engine.dispose()
    return url


@pytest.fixture
def env(database_url, tmp_path):
    settings = Settings(data_dir=tmp_path / "data", database_url=database_url,
                        auto_migrate=False, reconcile_interval_s=0, lease_seconds=60,
                        max_platform_failures=3, requeue_after_s=600)
    queue, clock = RecordingJobQueue(), Clock()
    app = create_app(settings, queue=queue, clock=clock)
    with TestClient(app) as client:
        yield Env(client=client, db=app.state.db, queue=queue, clock=clock, settings=settings)
