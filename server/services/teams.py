"""Teams in a competition (issue 23): create one (you become its captain), join one by its
invite code, leave, and the captain removes members. The organizers' rules come from the
bundle (`teams: {allowed, max_size, lock_at}`): no team changes when teams are not allowed or
after the lock date. One team per person per competition (a unique constraint, so a race
cannot break it). A member's earlier submissions in the competition join the team with them
(the team's quota and board entry then count them); every change is audited. Each function
commits its own unit of work; a unique constraint a simultaneous request broke is a 409.

Issue 33: names are normalized and unique by their confusables skeleton (services/names.py);
organizers and admins stay out of participant teams; a join locks the team's row, so the size
limit holds under concurrent joins, and is refused when it would take the team past a quota
(services/quotas.py); every action reads current membership; a removal rotates the invite
code; the last member out dissolves the team: its code is rotated, no one can join it, and its
submissions go back to their makers (into their current team, if any).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import Select, delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from server.core.errors import ConflictError, ForbiddenError, InvalidInputError, NotFoundError
from server.models import (
    AuditLog,
    Competition,
    Phase,
    Submission,
    Team,
    TeamMember,
    TeamStint,
    User,
)
from server.services.names import check_name, name_key
from server.services.participation import status_of
from server.services.quotas import check_join_within_quota, lock_team

TEAM_NAME = re.compile(r"^[\w .'-]{2,64}$")


def team_of(session: Session, comp: Competition, user: User) -> Team | None:
    """The team `user` is in now in `comp` (membership as it stands, never a past one)."""
    return session.execute(select(Team).join(TeamMember, TeamMember.team_id == Team.id).where(
        TeamMember.competition_id == comp.id, TeamMember.user_id == user.id)
    ).scalar_one_or_none()


def members(session: Session, team: Team) -> list[dict[str, Any]]:
    rows = session.execute(select(TeamMember, User.username)
                           .join(User, User.id == TeamMember.user_id)
                           .where(TeamMember.team_id == team.id).order_by(TeamMember.id)).all()
    return [{"user_id": m.user_id, "username": name, "joined_at": m.joined_at,
             "captain": m.user_id == team.captain_id} for m, name in rows]


def check_changes_allowed(comp: Competition, now: datetime) -> None:
    """Raise ConflictError when the competition has no teams or they are locked."""
    if not comp.teams_allowed:
        raise ConflictError(f"competition {comp.slug!r} has no teams: everyone takes part "
                            "alone", code="team.not_allowed")
    if comp.teams_lock_at is not None and now >= comp.teams_lock_at:
        raise ConflictError(f"teams of {comp.slug!r} are locked since "
                            f"{comp.teams_lock_at.isoformat()}: no one joins, leaves or is "
                            "removed any more", code="team.locked")


def check_participant_account(user: User) -> None:
    """Raise ForbiddenError for organizer and admin accounts: they are in no team."""
    if user.role in ("organizer", "admin"):
        raise ForbiddenError(f"{user.username!r} is an {user.role} account: organizers and "
                             "admins run competitions and are in no participant team; take "
                             "part with a participant account", code="team.staff")


def _check_may_be_in_a_team(session: Session, comp: Competition, user: User) -> None:
    check_participant_account(user)
    if status_of(session, comp, user) != "approved":
        raise ForbiddenError(f"join competition {comp.slug!r} before you make or join a team",
                             code="team.not_participant")
    if team_of(session, comp, user) is not None:
        raise ForbiddenError("you are in a team of this competition already; leave it first "
                             "(one team per person per competition)", code="team.already")


def _phases(comp: Competition) -> Select[int]:
    return select(Phase.id).where(Phase.competition_id == comp.id)


def _add(session: Session, team: Team, user: User, comp: Competition, now: datetime) -> None:
    session.add(TeamMember(team_id=team.id, competition_id=comp.id, user_id=user.id,
                           joined_at=now))
    session.add(TeamStint(team_id=team.id, competition_id=comp.id, user_id=user.id,
                          joined_at=now))
    session.execute(update(Submission).where(
        Submission.user_id == user.id, Submission.team_id.is_(None),
        Submission.phase_id.in_(_phases(comp))).values(team_id=team.id)
        .execution_options(synchronize_session=False))


def _audit(session: Session, actor: User, action: str, team: Team, now: datetime,
           **details: object) -> None:
    session.add(AuditLog(actor_id=actor.id, action=action, target=f"team:{team.id}",
                         details={"competition_id": team.competition_id, "team": team.name,
                                  **details}, at=now))


@contextmanager
def _unit(session: Session) -> Iterator[None]:
    """One unit of work: committed at the end; a constraint broken by a simultaneous request
    (at a flush or at the commit) is a 409, never a 500."""
    try:
        yield
        session.commit()
    except IntegrityError as exc:  # a simultaneous join or a name taken a moment ago
        session.rollback()
        raise ConflictError("that team name is taken, or you joined a team a moment ago; "
                            "reload the page", code="team.conflict") from exc


def _check_name_free(session: Session, comp: Competition, name: str) -> None:
    taken = session.execute(select(Team.name).where(
        Team.competition_id == comp.id, Team.name_key == name_key(name))).scalar()
    if taken is not None:
        alike = "" if taken == name else f" (or one that looks the same: {taken!r})"
        raise ConflictError(f"a team named {name!r} exists in this competition{alike}; choose "
                            "another name", code="team.name_taken")


def create_team(session: Session, comp: Competition, user: User, name: str,
                now: datetime) -> Team:
    check_changes_allowed(comp, now)
    name = check_name(name, "team name")
    if not TEAM_NAME.match(name):
        raise InvalidInputError(f"the team name {name!r} is not 2 to 64 letters, digits, "
                                "spaces or .'-; choose one like 'Few-shot Foxes'",
                                code="team.bad_name")
    with _unit(session):
        _check_may_be_in_a_team(session, comp, user)
        _check_name_free(session, comp, name)
        team = Team(competition_id=comp.id, name=name, captain_id=user.id, created_at=now,
                    invite_code=secrets.token_urlsafe(12))
        session.add(team)
        session.flush()
        _add(session, team, user, comp, now)
        _audit(session, user, "team.create", team, now)
    return team


def join_team(session: Session, comp: Competition, user: User, code: str,
              now: datetime) -> Team:
    check_changes_allowed(comp, now)
    team = session.execute(select(Team).where(Team.competition_id == comp.id,
                                              Team.invite_code == code.strip())
                           ).scalar_one_or_none()
    if team is None or team.dissolved_at is not None:
        raise NotFoundError("no team of this competition has that invite code; ask your "
                            "captain for the link again", code="team.bad_code")
    with _unit(session):
        _check_may_be_in_a_team(session, comp, user)
        lock_team(session, team.id)  # joins of one team one at a time: the size holds
        session.refresh(team)
        if team.dissolved_at is not None:
            raise NotFoundError(f"team {team.name!r} was dissolved a moment ago",
                                code="team.bad_code")
        size = len(members(session, team))
        if size >= comp.team_max_size:
            raise ConflictError(f"team {team.name!r} is full ({size} of {comp.team_max_size} "
                                "members)", code="team.full")
        check_join_within_quota(session, team, user.id, now)
        _add(session, team, user, comp, now)
        _audit(session, user, "team.join", team, now, user_id=user.id)
    return team


def _dissolve(session: Session, team: Team, now: datetime) -> None:
    """The last member left: no one can join any more, and the team's submissions go back to
    their makers (into the team each is in now, else their own), so no empty team keeps a
    board entry nobody stands for."""
    team.dissolved_at, team.captain_id = now, None
    team.invite_code = secrets.token_urlsafe(12)
    makers = session.execute(select(Submission.user_id).where(
        Submission.team_id == team.id).distinct()).scalars().all()
    for maker in makers:
        now_in = session.execute(select(TeamMember.team_id).where(
            TeamMember.competition_id == team.competition_id,
            TeamMember.user_id == maker)).scalar()
        session.execute(update(Submission).where(
            Submission.team_id == team.id, Submission.user_id == maker).values(team_id=now_in)
            .execution_options(synchronize_session=False))


def _drop(session: Session, team: Team, user_id: int, now: datetime) -> None:
    session.execute(delete(TeamMember).where(
        TeamMember.team_id == team.id, TeamMember.user_id == user_id)
        .execution_options(synchronize_session=False))
    session.execute(update(TeamStint).where(
        TeamStint.team_id == team.id, TeamStint.user_id == user_id,
        TeamStint.left_at.is_(None)).values(left_at=now)
        .execution_options(synchronize_session=False))
    left = [m["user_id"] for m in members(session, team)]
    if not left:
        _dissolve(session, team, now)
    elif team.captain_id == user_id:
        team.captain_id = left[0]  # the longest-standing member leads


def leave_team(session: Session, comp: Competition, user: User, now: datetime) -> None:
    """Leave your team; its submissions stay the team's. The last one out dissolves it."""
    check_changes_allowed(comp, now)
    team = team_of(session, comp, user)
    if team is None:
        raise NotFoundError("you are in no team of this competition", code="team.none")
    with _unit(session):
        lock_team(session, team.id)
        _drop(session, team, user.id, now)
        _audit(session, user, "team.leave", team, now, user_id=user.id)


def remove_member(session: Session, comp: Competition, captain: User, team_id: int,
                  user_id: int, now: datetime) -> None:
    """The captain removes a member (not themselves: they leave instead); the invite code
    changes, so the removed member cannot come back with it."""
    team = session.get(Team, team_id)
    if team is None or team.competition_id != comp.id:
        raise NotFoundError(f"no team {team_id} in this competition")
    current = team_of(session, comp, captain)
    if current is None or current.id != team.id or team.captain_id != captain.id:
        raise ForbiddenError(f"only the captain of {team.name!r} removes its members",
                             code="team.not_captain")
    check_changes_allowed(comp, now)
    with _unit(session):
        lock_team(session, team.id)
        if user_id == captain.id or user_id not in {m["user_id"] for m in members(session, team)}:
            raise NotFoundError(f"user {user_id} is not another member of {team.name!r}; to "
                                "leave your own team use Leave", code="team.not_member")
        _drop(session, team, user_id, now)
        team.invite_code = secrets.token_urlsafe(12)
        _audit(session, captain, "team.remove", team, now, user_id=user_id)
