"""Workers as the server sees them: the name each reports in its claim, when it was last heard
from, which run it holds, what hardware and sandbox images it announced, and its last platform
fault. Written on claim, heartbeat, finish and release; read by the organizers' worker status
view and by the check of a phase's image."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from server.models.base import Base, UTCDateTime, utcnow


class Worker(Base):
    __tablename__ = "workers"
    # Names are unique per pool (issue 37): among the shared workers, and within each pool.
    __table_args__ = (
        Index("uq_workers_shared_name", "name", unique=True,
              postgresql_where=text("pool_id IS NULL"), sqlite_where=text("pool_id IS NULL")),
        Index("uq_workers_pool_name", "pool_id", "name", unique=True,
              postgresql_where=text("pool_id IS NOT NULL"),
              sqlite_where=text("pool_id IS NOT NULL")),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    pool_id: Mapped[int | None] = mapped_column(ForeignKey("worker_pools.id", ondelete="CASCADE"))
    """The pool it serves (its credential's); None: one of the operator's shared workers."""
    host: Mapped[str | None] = mapped_column(String(200))
    """The host it announced (pool workers, with each job request); None: not announced."""
    first_seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    current_run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"))
    stage: Mapped[str | None] = mapped_column(String(16))
    gpus: Mapped[list[Any]] = mapped_column(JSON, default=list)
    runs_claimed: Mapped[int] = mapped_column(Integer, default=0)
    images: Mapped[list[str] | None] = mapped_column(JSON)
    """Sandbox images its Docker engine holds, as last reported; None: never reported (or the
    unsandboxed local executor, which runs no image)."""
    last_fault: Mapped[str | None] = mapped_column(Text)
    """The details of the last platform fault it released a run for (operators only)."""
    last_fault_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    unhealthy: Mapped[str | None] = mapped_column(Text)
    """Why it stopped claiming (its disk is full, its engine does not answer), as it last
    reported; None once a claim of its went through (issue 21)."""
    unhealthy_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    task_isolation: Mapped[str | None] = mapped_column(String(16))
    """What its start-up probe found (issue 34): `own` namespaces per test task, or `shared`
    (its host refuses them: every run falls back); None: not reported."""
    host_lock: Mapped[bool | None] = mapped_column(Boolean)
    """Whether its last claim or job request said it runs a secret phase's run alone on its
    host (worker/host_lock.py); False: it gets no such run (an older worker); None: not heard
    from since the column was added."""
