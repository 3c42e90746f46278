"""Migration 0010 (issue 33) upgrades a database holding data, on SQLite and Postgres: every
user and team gets its name key (two old look-alike names both survive, told apart by `#id`),
every current member an open team stint; and then no new look-alike gets in."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy
from sqlalchemy import text

from server.core.db import upgrade_database

PG_ADMIN_URL = os.environ.get("ARENA_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
T0 = "2030-01-15 12:00:00+00:00"


@pytest.fixture(params=["sqlite", "postgres"])
def empty_url(request, tmp_path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'old.db'}"
        return
    try:
        import psycopg

        admin = psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=3)
    except Exception as exc:  # noqa: BLE001 - any connection failure means "no Postgres"
        if os.environ.get("CI"):
            pytest.fail(f"Postgres is not reachable ({exc})")
        pytest.skip(f"Postgres is not reachable ({exc})")
    name = f"arena_mig_{uuid.uuid4().hex[:12]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    try:
        yield f"{base}/{name}"
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def test_0010_backfills_keys_and_stints_and_keeps_old_lookalikes(empty_url):
    upgrade_database(empty_url, "0009")
    engine = sqlalchemy.create_engine(empty_url)
    with engine.begin() as conn:
        for uid, name in ((1, "ada_l"), (2, "ada_I"), (3, "bob")):
            conn.execute(text("INSERT INTO users (id, username, role, is_active, created_at) "
                              "VALUES (:id, :name, 'participant', true, :t)"),
                         {"id": uid, "name": name, "t": T0})
        conn.execute(text("INSERT INTO competitions (id, slug, title, description, created_at) "
                          "VALUES (1, 'c', 'C', '', :t)"), {"t": T0})
        for tid, name, code in ((1, "Few-shot Foxes", "k1"), (2, "Few-shot Fоxes", "k2")):
            conn.execute(text("INSERT INTO teams (id, competition_id, name, captain_id, "
                              "invite_code, created_at) VALUES (:id, 1, :name, :id, :code, :t)"),
                         {"id": tid, "name": name, "code": code, "t": T0})
            conn.execute(text("INSERT INTO team_members (team_id, competition_id, user_id, "
                              "joined_at) VALUES (:id, 1, :id, :t)"), {"id": tid, "t": T0})
    engine.dispose()
    upgrade_database(empty_url)
    engine = sqlalchemy.create_engine(empty_url)
    with engine.begin() as conn:
        users = conn.execute(text("SELECT username, name_key FROM users ORDER BY id")).all()
        teams = conn.execute(text("SELECT name, name_key, dissolved_at FROM teams ORDER BY id")
                             ).all()
        stints = conn.execute(text("SELECT team_id, user_id, left_at FROM team_stints "
                                   "ORDER BY team_id")).all()
        assert [tuple(u) for u in users] == [("ada_l", "ada_l"), ("ada_I", "ada_l#2"),
                                             ("bob", "bob")]
        assert [tuple(t) for t in teams] == [("Few-shot Foxes", "few-shot foxes", None),
                                             ("Few-shot Fоxes", "few-shot foxes#2", None)]
        assert [tuple(s) for s in stints] == [(1, 1, None), (2, 2, None)]
        with pytest.raises(sqlalchemy.exc.IntegrityError), conn.begin_nested():
            conn.execute(text("INSERT INTO users (username, name_key, role, is_active, "
                              "created_at) VALUES ('ADA_L', 'ada_l', 'participant', true, "
                              ":t)"), {"t": T0})
    engine.dispose()
