"""Alembic environment: the URL comes from `config.attributes["database_url"]` (set by
server.core.db.upgrade_database) or, for the plain CLI (`alembic -c server/alembic.ini upgrade
head`), from the server's own Settings: ARENA_DATABASE_URL, else the SQLite file under
ARENA_DATA_DIR (the same default `arena serve` uses)."""

from __future__ import annotations

from pathlib import Path

from alembic import context
from sqlalchemy import create_engine, pool

from server.core.config import Settings
from server.models import Base

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = config.attributes.get("database_url") or config.get_main_option("sqlalchemy.url")
    if not url:
        url = Settings().database_url  # what the server would open
        if url.startswith("sqlite:///") and ":memory:" not in url:
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    return url


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True,
                      render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = create_engine(_url(), poolclass=pool.NullPool)
    with engine.connect() as connection:
        # batch mode lets later ALTERs work on SQLite, which cannot alter columns in place
        context.configure(connection=connection, target_metadata=target_metadata,
                          render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
