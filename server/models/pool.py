"""Worker pools (issue 37): an organizer's own workers, serving only their competition's phases.

A pool belongs to one competition; its workers authenticate with a pool credential (only its
sha256 is stored) and take jobs from the server over HTTP (`POST /internal/pool/jobs`), never
from the broker. A phase served by a pool has a `pool_phases` row; a phase without one is served
by the operator's shared workers through Celery, as before. `pool_offers` remembers which queued
run was handed to a pool worker and until when it is reserved for that worker's claim.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from server.models.base import Base, UTCDateTime, utcnow


class WorkerPool(Base):
    __tablename__ = "worker_pools"
    __table_args__ = (UniqueConstraint("competition_id", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    competition_id: Mapped[int] = mapped_column(
        ForeignKey("competitions.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    created_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class PoolCredential(Base):
    """One credential of a pool: `arena_pool_<random>`, shown once; `prefix` is the marker and
    the first 8 random characters (`arena_pool_AbC123xY`), shown to tell credentials apart. A
    revoked one is refused at the next call."""

    __tablename__ = "pool_credentials"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    pool_id: Mapped[int] = mapped_column(ForeignKey("worker_pools.id", ondelete="CASCADE"),
                                         index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(24))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class PoolPhase(Base):
    """A phase served by a pool (at most one); no row: the operator's shared workers."""

    __tablename__ = "pool_phases"

    phase_id: Mapped[int] = mapped_column(ForeignKey("phases.id", ondelete="CASCADE"),
                                          primary_key=True)
    pool_id: Mapped[int] = mapped_column(ForeignKey("worker_pools.id", ondelete="CASCADE"),
                                         index=True)


class PoolOffer(Base):
    """A queued run of a pool phase handed to a pool worker: not offered again before
    `available_at` (the claim's window, or a released run's back-off)."""

    __tablename__ = "pool_offers"

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"),
                                        primary_key=True)
    worker: Mapped[str | None] = mapped_column(String(200))
    offered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    available_at: Mapped[datetime] = mapped_column(UTCDateTime)
