"""Submissions, their runs and per-task results.

A Submission's `state`, `reason`, `score` are a cache of what its runs say, rewritten in the same
transaction as every run change (see services/runs.py), so listings and the leaderboard need no
aggregation; only current runs count — a re-run marks the old runs `superseded_at` (kept as
history) and adds new ones. Runs carry the lease (owner, expiry, fencing token), a hashed
per-run token and `cancel_requested_at` (a running run stops at its next heartbeat). A
submission carried into a final phase points at its origin (`carried_from_id`), shares its
stored zip and is not `charged` to any quota.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from server.models.base import Base, UTCDateTime, utcnow
from submission_api.contract import states as contract_states
from submission_api.contract.reasons import FailureReason
from submission_api.contract.states import RunState

# The run contract's states and reason, as the plain strings the columns hold.
RUN_STATES = tuple(state.value for state in RunState)
ACTIVE_STATES = tuple(state.value for state in contract_states.ACTIVE_STATES)
TERMINAL_STATES = tuple(state.value for state in contract_states.TERMINAL_STATES)
PLATFORM_ERROR = FailureReason.PLATFORM_ERROR.value


class Submission(Base):
    __tablename__ = "submissions"
    __table_args__ = (
        Index("ix_submissions_phase_user_created", "phase_id", "user_id", "created_at"),
        UniqueConstraint("phase_id", "carried_from_id", name="uq_submissions_phase_carried"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    phase_id: Mapped[int] = mapped_column(ForeignKey("phases.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    sha256: Mapped[str] = mapped_column(String(64))
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    storage_path: Mapped[str] = mapped_column(String(500))
    zip_root: Mapped[str] = mapped_column(String(255), default="")
    note: Mapped[str] = mapped_column(Text, default="")
    state: Mapped[str] = mapped_column(String(16), default="queued", index=True)
    reason: Mapped[str | None] = mapped_column(String(64))
    message: Mapped[str | None] = mapped_column(Text)
    score: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Issue 23: the member's team when it was made (quota and board count the team), and the
    # method it implements (shown on the board), as its owner described it.
    team_id: Mapped[int | None] = mapped_column(ForeignKey("teams.id", ondelete="SET NULL"),
                                                index=True)
    method_name: Mapped[str] = mapped_column(String(100), default="", server_default="")
    method_description: Mapped[str] = mapped_column(Text, default="", server_default="")
    code_url: Mapped[str | None] = mapped_column(String(500))
    league: Mapped[str | None] = mapped_column(String(64))
    is_selected: Mapped[bool] = mapped_column(Boolean, default=False)
    is_baseline: Mapped[bool] = mapped_column(Boolean, default=False)
    charged: Mapped[bool] = mapped_column(Boolean, default=True)
    carried_from_id: Mapped[int | None] = mapped_column(
        ForeignKey("submissions.id", ondelete="SET NULL"))
    # Set by an organizer (audited): off the leaderboard and out of any final until undone.
    disqualified_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    disqualified_reason: Mapped[str | None] = mapped_column(Text)

    runs: Mapped[list[Run]] = relationship(back_populates="submission", order_by="Run.index")


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (UniqueConstraint("submission_id", "index"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[int] = mapped_column(
        ForeignKey("submissions.id", ondelete="CASCADE"), index=True
    )
    index: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(BigInteger)
    state: Mapped[str] = mapped_column(String(16), default="queued", index=True)
    reason: Mapped[str | None] = mapped_column(String(64))
    message: Mapped[str | None] = mapped_column(Text)
    fencing_token: Mapped[int] = mapped_column(Integer, default=0)
    lease_owner: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    platform_failures: Mapped[int] = mapped_column(Integer, default=0)
    run_token_hash: Mapped[str | None] = mapped_column(String(64))
    score: Mapped[float | None] = mapped_column(Float)
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    log: Mapped[str | None] = mapped_column(Text)
    enqueued_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    cancel_requested_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    superseded_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The worker's last heartbeat report (schemas.internal.RunProgress): step, tasks, log tail.
    progress: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # Whether its test tasks had their own namespaces or fell back to shared ones, as the
    # worker's meta-test reported it (issue 34); shown to organizers and operators.
    isolation: Mapped[str | None] = mapped_column(Text)
    # Per-stage CPU time and peak memory, and the stage marks (contract.usage.RunUsage, issue
    # 38.6); shown to the phase's organizers.
    usage: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # Where a failed run failed (contract.wire.FailureStage, issue 35.3), as its worker's
    # verdict placed it; services/secrecy.py reads it. None for older runs and scored ones.
    failure_stage: Mapped[str | None] = mapped_column(String(32))
    # What meta-train alone wrote (the finish body's `meta_train_log`, issue 35.3): the part of
    # `log` the owner of a secret-data run reads (services/secrecy.py). None for older runs and
    # those the worker could not split: their log is then withheld whole from such an owner.
    meta_train_log: Mapped[str | None] = mapped_column(Text)

    submission: Mapped[Submission] = relationship(back_populates="runs")
    tasks: Mapped[list[TaskResult]] = relationship(order_by="TaskResult.task_id")


class TaskResult(Base):
    __tablename__ = "task_results"
    __table_args__ = (UniqueConstraint("run_id", "group", "task_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    task_id: Mapped[int] = mapped_column(Integer)
    dataset: Mapped[str] = mapped_column(String(200))
    group: Mapped[str] = mapped_column(String(32), default="test")
    n_ways: Mapped[int] = mapped_column(Integer)
    n_shots: Mapped[int] = mapped_column(Integer)
    score: Mapped[float] = mapped_column(Float)
    accuracy: Mapped[float | None] = mapped_column(Float)
    # FewSTAB's per-task wAcc: its boards' statistics are of this value (issue 22)
    worst_class_accuracy: Mapped[float | None] = mapped_column(Float, nullable=True)
