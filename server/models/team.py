"""Teams (issue 23): a team belongs to one competition, has a captain and members, and an
invite code that lets others join it. One team per person per competition is a database
constraint (`team_members` unique on competition and user), so two simultaneous joins cannot
put one person in two teams. A submission made by a member carries its `team_id`: the quota
and the leaderboard count the team, not the person.

Issue 33: a team's `name_key` (the TR39 skeleton of its name, services/names.py) is unique in
its competition, so "Few-shot Fоxes" cannot stand beside "Few-shot Foxes"; `dissolved_at` marks
a team whose last member left (no one joins it, the board leaves it out); a `TeamStint` keeps
each member's time in a team, so the team's submissions made meanwhile stay charged to the
member's quota after they leave.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.engine.default import DefaultExecutionContext
from sqlalchemy.orm import Mapped, mapped_column

from server.models.base import Base, UTCDateTime, utcnow
from server.services.names import name_key


def _team_name_key(context: DefaultExecutionContext) -> str:
    return name_key(context.get_current_parameters()["name"])  # type: ignore[no-untyped-call]


class Team(Base):
    __tablename__ = "teams"
    __table_args__ = (UniqueConstraint("competition_id", "name"),
                      UniqueConstraint("name_key", "competition_id"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    competition_id: Mapped[int] = mapped_column(
        ForeignKey("competitions.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(64))
    name_key: Mapped[str] = mapped_column(String(255), default=_team_name_key)
    captain_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    invite_code: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    dissolved_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class TeamMember(Base):
    __tablename__ = "team_members"
    __table_args__ = (UniqueConstraint("competition_id", "user_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), index=True)
    competition_id: Mapped[int] = mapped_column(
        ForeignKey("competitions.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    joined_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class TeamStint(Base):
    """One member's time in one team, `left_at` None while they are in it."""

    __tablename__ = "team_stints"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), index=True)
    competition_id: Mapped[int] = mapped_column(
        ForeignKey("competitions.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"),
                                         index=True)
    joined_at: Mapped[datetime] = mapped_column(UTCDateTime)
    left_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
