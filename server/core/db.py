"""Database engines, sessions and migrations, built by factories (nothing connects at import).

SQLite gets WAL (readers never wait for the writer), foreign keys and a busy timeout. Because
pysqlite's own transaction handling starts transactions lazily and too late for locking, we take
it over: every transaction begins with an explicit BEGIN, and sessions from `write_sessions`
begin with BEGIN IMMEDIATE so that check-then-insert (quotas) holds the write lock from the
first read. On Postgres the same code locks rows with SELECT ... FOR UPDATE instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import CursorResult, Engine, Executable, create_engine, event
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session, sessionmaker

if TYPE_CHECKING:
    from alembic.config import Config

_MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"
_IMMEDIATE = "arena_sqlite_immediate"


@dataclass(frozen=True)
class PoolSize:
    """SQLAlchemy's connection pool of one process (from Settings.db_pool_*)."""

    size: int = 10
    max_overflow: int = 20
    timeout_s: float = 30.0


def make_engine(url: str, pool: PoolSize = PoolSize()) -> Engine:
    """Create an engine; for SQLite, create the parent folder and install the pragmas."""
    sizing = {"pool_size": pool.size, "max_overflow": pool.max_overflow,
              "pool_timeout": pool.timeout_s}
    if not url.startswith("sqlite"):
        # sessions in UTC: timestamps come back in datetime.UTC, which needs no conversion
        return create_engine(url, pool_pre_ping=True,
                             connect_args={"options": "-c timezone=UTC"}, **sizing)
    if url.startswith("sqlite:///") and ":memory:" not in url:
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    else:
        sizing = {}  # an in-memory database lives in one connection (SingletonThreadPool)
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30},
                           **sizing)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (see module docstring)
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get(_IMMEDIATE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


@dataclass(frozen=True)
class Database:
    """The engine with its two session factories: `sessions` (reads, simple writes) and
    `write_sessions` (check-then-write transactions that must serialize on SQLite)."""

    engine: Engine
    sessions: sessionmaker[Session]
    write_sessions: sessionmaker[Session]

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    @contextmanager
    def session(self, write: bool = False) -> Iterator[Session]:
        """A session committed on success, rolled back on error, always closed."""
        factory = self.write_sessions if write else self.sessions
        with factory() as session:
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise


def count_changed(session: Session, statement: Executable) -> int:
    """Execute an UPDATE or DELETE; the number of rows it matched. `Session.execute` is typed
    as returning a `Result`; for DML it is a `CursorResult`, which has the row count."""
    return cast(CursorResult[Any], session.execute(statement)).rowcount


def make_database(url: str, pool: PoolSize = PoolSize()) -> Database:
    """Build the engine and session factories for `url`."""
    engine = make_engine(url, pool)
    immediate = engine.execution_options(**{_IMMEDIATE: True})
    return Database(
        engine=engine,
        sessions=sessionmaker(engine, expire_on_commit=False),
        write_sessions=sessionmaker(immediate, expire_on_commit=False),
    )


def alembic_config(url: str) -> Config:
    """An Alembic Config pointing at our migrations, independent of the working directory."""
    from alembic.config import Config

    config = Config(str(_MIGRATIONS.parent / "alembic.ini"))
    config.set_main_option("script_location", str(_MIGRATIONS))
    config.attributes["database_url"] = url
    return config


def upgrade_database(url: str, revision: str = "head") -> None:
    """Apply the migrations to `url` (creating the SQLite file if needed)."""
    from alembic import command

    if url.startswith("sqlite:///") and ":memory:" not in url:
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    command.upgrade(alembic_config(url), revision)
