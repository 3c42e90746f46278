"""Competitions, their phases, registered datasets, and the per-phase participation row.

A Phase stores its evaluation parameters as JSON (`ProtocolParams.to_dict()`), its data as
dataset names + content hashes per role, and its limits, quotas and leaderboard rule, so a run
can be reproduced from the phase row alone. A final phase names the phase it carries
submissions from (`carry_from_id`); `closed_at` records that a phase was closed and its
submissions carried, so closing twice carries nothing twice. A competition keeps its pages, its
leagues (name, title, final threshold) and the YAML bundle it was last built from.
`Participation` exists so that quota checks have one row per (user, phase) to lock.
A competition is open to every participant or needs the organizer's approval
(`participation`); `CompetitionMember` records each request and its decision. A `DatasetGrant`
lets one organizer use a registered dataset in their phases: it is written when they register
that content (its hash verified), so knowing a hash is not enough to use someone else's data.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from server.models.base import Base, UTCDateTime, utcnow
from submission_api.contract.resources import DEFAULT_TIME_LIMIT_S

PARTICIPATION_MODES = ("open", "approval")


class Competition(Base):
    __tablename__ = "competitions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    slug: Mapped[str] = mapped_column(String(64), unique=True)
    title: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, default="")
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    pages: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    leagues: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    bundle: Mapped[str | None] = mapped_column(Text)
    participation: Mapped[str] = mapped_column(String(16), default="open",
                                               server_default="open")
    # Issue 23: terms a participant accepts before submitting (Markdown, "" = none), the
    # onboarding tabs (overview/data/evaluation Markdown, get-started links) and team rules.
    terms: Mapped[str] = mapped_column(Text, default="", server_default="")
    tabs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    teams_allowed: Mapped[bool] = mapped_column(Boolean, default=False,
                                                server_default="0")
    team_max_size: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    teams_lock_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    phases: Mapped[list[Phase]] = relationship(back_populates="competition", order_by="Phase.id")


class Phase(Base):
    __tablename__ = "phases"
    __table_args__ = (UniqueConstraint("competition_id", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    competition_id: Mapped[int] = mapped_column(
        ForeignKey("competitions.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(100))
    description: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(String(16), default="draft")
    starts_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    ends_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    protocol: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    seed: Mapped[int] = mapped_column(BigInteger, default=0)
    runs_per_submission: Mapped[int] = mapped_column(Integer, default=1)
    time_limit_s: Mapped[int] = mapped_column(Integer, default=DEFAULT_TIME_LIMIT_S)
    resources: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    image: Mapped[str | None] = mapped_column(String(255))
    queue: Mapped[str | None] = mapped_column(String(64))
    quota_per_day: Mapped[int | None] = mapped_column(Integer)
    quota_total: Mapped[int | None] = mapped_column(Integer)
    quota_in_flight: Mapped[int | None] = mapped_column(Integer)
    hide_logs: Mapped[bool] = mapped_column(Boolean, default=False)
    leaderboard_rule: Mapped[str] = mapped_column(String(16), default="best")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    leaderboard: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    carry_from_id: Mapped[int | None] = mapped_column(
        ForeignKey("phases.id", ondelete="SET NULL"))
    closed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    factsheet: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)  # questions

    competition: Mapped[Competition] = relationship(back_populates="phases")


class Participation(Base):
    """One row per (user, phase): the row locked while a quota is checked and charged."""

    __tablename__ = "participations"
    __table_args__ = (UniqueConstraint("user_id", "phase_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    phase_id: Mapped[int] = mapped_column(ForeignKey("phases.id", ondelete="CASCADE"), index=True)
    n_uploads: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Dataset(Base):
    """A compiled dataset cache entry, stored by content hash."""

    __tablename__ = "datasets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    content_hash: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    storage_path: Mapped[str] = mapped_column(String(500))
    n_images: Mapped[int] = mapped_column(Integer, default=0)
    n_classes: Mapped[int] = mapped_column(Integer, default=0)
    size_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    created_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class CompetitionMember(Base):
    """A participant's request to enter an approval-only competition, and its decision."""

    __tablename__ = "competition_members"
    __table_args__ = (UniqueConstraint("competition_id", "user_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    competition_id: Mapped[int] = mapped_column(
        ForeignKey("competitions.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    status: Mapped[str] = mapped_column(String(16), default="pending")
    requested_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    decided_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    accepted_terms_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class DatasetGrant(Base):
    """One organizer may use one registered dataset (they uploaded that very content)."""

    __tablename__ = "dataset_grants"
    __table_args__ = (UniqueConstraint("dataset_id", "user_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    granted_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
