"""Who may submit to a competition: everyone (`open`, the default) or, when its organizers
chose `approval` (as CodaLab lets them), only participants whose request they approved.

A participant asks once (`request_participation`); the organizer approves or denies
(`decide`), in the dashboard, the CLI (`arena participants`) or the API. A denied participant
stays denied until an organizer approves them: asking again changes nothing. Staff of the
competition (its owner, admins) always may submit (baselines). The check runs inside the
upload's transaction (services/upload.py), so an approval revoked a moment ago is honoured.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core.errors import ForbiddenError, InvalidInputError, NotFoundError
from server.models import AuditLog, Competition, CompetitionMember, User
from server.models.competition import PARTICIPATION_MODES


def member(session: Session, competition_id: int, user_id: int) -> CompetitionMember | None:
    return session.execute(select(CompetitionMember).where(
        CompetitionMember.competition_id == competition_id,
        CompetitionMember.user_id == user_id)).scalar_one_or_none()


def status_of(session: Session, comp: Competition, user: User) -> str:
    """'approved', 'pending', 'denied' or 'none' (never asked) for `user` in `comp`."""
    if comp.participation == "open" or user.role == "admin" or comp.owner_id == user.id:
        return "approved"
    row = member(session, comp.id, user.id)
    return "none" if row is None else row.status


def check_may_submit(session: Session, comp: Competition, user: User) -> None:
    """Raise ForbiddenError (`participation.required`) unless `user` may submit to `comp`."""
    status = status_of(session, comp, user)
    if status == "approved":
        return
    why = {"none": "you have not asked to take part",
           "pending": "your request is waiting for the organizers",
           "denied": "the organizers denied your request"}[status]
    raise ForbiddenError(
        f"competition {comp.slug!r} needs the organizers' approval to take part, and {why}; "
        f"ask with `arena join {comp.slug}` (POST /api/v1/competitions/{comp.id}/participation)"
        " and submit once approved", code="participation.required", status=status)


def request_participation(session: Session, comp: Competition, user: User,
                          now: datetime) -> str:
    """Ask to take part; returns the caller's status afterwards (idempotent)."""
    status = status_of(session, comp, user)
    if status != "none":
        return status
    session.add(CompetitionMember(competition_id=comp.id, user_id=user.id, status="pending",
                                  requested_at=now))
    session.flush()
    return "pending"


def decide(session: Session, comp: Competition, user_id: int, approve: bool, actor: User,
           now: datetime) -> CompetitionMember:
    """Approve or deny a participant (a request need not exist: organizers may invite)."""
    if session.get(User, user_id) is None:
        raise NotFoundError(f"no user with id {user_id}; list requests with "
                            f"GET /api/v1/competitions/{comp.id}/participants")
    row = member(session, comp.id, user_id)
    if row is None:
        row = CompetitionMember(competition_id=comp.id, user_id=user_id, requested_at=now)
        session.add(row)
    row.status = "approved" if approve else "denied"
    row.decided_at, row.decided_by = now, actor.id
    session.add(AuditLog(actor_id=actor.id, action=f"participation.{row.status}",
                         target=f"competition:{comp.id}", details={"user_id": user_id}, at=now))
    session.flush()
    return row


def set_mode(session: Session, comp: Competition, mode: str, actor: User, now: datetime) -> None:
    if mode not in PARTICIPATION_MODES:
        raise InvalidInputError(f"participation mode {mode!r}; expected one of "
                                f"{list(PARTICIPATION_MODES)}", code="participation.bad_mode")
    comp.participation = mode
    session.add(AuditLog(actor_id=actor.id, action="participation.mode",
                         target=f"competition:{comp.id}", details={"mode": mode}, at=now))
    session.flush()


def list_members(session: Session, comp: Competition) -> list[dict[str, Any]]:
    """Every request of `comp`, pending first, with the participant's name."""
    rows = session.execute(
        select(CompetitionMember, User.username).join(User, User.id == CompetitionMember.user_id)
        .where(CompetitionMember.competition_id == comp.id)
        .order_by(CompetitionMember.status != "pending", CompetitionMember.id)).all()
    return [{"user_id": m.user_id, "username": name, "status": m.status,
             "requested_at": m.requested_at, "decided_at": m.decided_at} for m, name in rows]


def pending_requests(session: Session, competition_ids: list[int]) -> list[dict[str, Any]]:
    """Pending requests across the given competitions (the organizer dashboard)."""
    rows = session.execute(
        select(CompetitionMember, User.username, Competition.title)
        .join(User, User.id == CompetitionMember.user_id)
        .join(Competition, Competition.id == CompetitionMember.competition_id)
        .where(CompetitionMember.competition_id.in_(competition_ids),
               CompetitionMember.status == "pending").order_by(CompetitionMember.id)).all()
    return [{"competition_id": m.competition_id, "competition": title, "user_id": m.user_id,
             "username": name, "requested_at": m.requested_at} for m, name, title in rows]
