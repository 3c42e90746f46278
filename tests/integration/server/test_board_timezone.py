"""Timestamps read back from the database are in `datetime.UTC` itself (issue 38.4): Postgres
sessions run in UTC, so `UTCDateTime` converts nothing; converting every `created_at` of a
10,000-entry board from the session's zone (a ZoneInfo) took ~50 ms of its ranking."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from sqlalchemy import select, text

from server.core.db import make_engine
from server.models import User


def test_timestamps_come_back_in_utc_itself(database_url):
    engine = make_engine(database_url)
    try:
        paris = timezone(timedelta(hours=1))
        written = datetime(2026, 3, 1, 13, 0, tzinfo=paris)
        with engine.begin() as conn:
            if engine.dialect.name == "postgresql":
                assert conn.execute(text("SHOW timezone")).scalar() == "UTC"
            conn.execute(User.__table__.insert().values(
                username="tz-probe", role="participant", created_at=written))
            read = conn.execute(select(User.created_at)
                                .where(User.username == "tz-probe")).scalar_one()
        assert read == written and read.tzinfo is UTC
    finally:
        engine.dispose()
