"""Who may submit to a competition: everyone (`open`, the default) or, when its organizers
chose `approval` (as CodaLab lets them), only participants whose request they approved.

A participant asks once (`request_participation`); the organizer approves or denies
(`decide`), in the dashboard, the CLI (`arena participants`) or the API. Organizers decide only
on accounts that asked to join this competition, submitted to it, or that they created: a
decision on any other account would make it "managed" by them (services/tenancy.py: its email
shown, revocable), so any organizer could reach any account by approving it. A denied participant
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
from server.models import AuditLog, Competition, CompetitionMember, Phase, Submission, User
from server.models.competition import PARTICIPATION_MODES
from server.services.email_verification import check_verified
from server.services.tenancy import created_user_ids, is_admin


def member(session: Session, competition_id: int, user_id: int) -> CompetitionMember | None:
    return session.execute(select(CompetitionMember).where(
        CompetitionMember.competition_id == competition_id,
        CompetitionMember.user_id == user_id)).scalar_one_or_none()


def status_of(session: Session, comp: Competition, user: User) -> str:
    """'approved', 'pending', 'denied' or 'none' (never asked) for `user` in `comp`.

    A competition with terms (issue 23) counts only members who accepted them: until then a
    participant is 'none', in an open competition too."""
    if user.role == "admin" or comp.owner_id == user.id:
        return "approved"
    if comp.participation == "open" and not comp.terms:
        return "approved"
    row = member(session, comp.id, user.id)
    if row is None or (comp.terms and row.accepted_terms_at is None and row.status != "denied"):
        return "none"
    return row.status


def may_submit(session: Session, comp: Competition, user: User | None) -> bool:
    """Whether pages show Submit and the quota: members who may submit, and the anonymous in a
    competition anyone may enter at once (the button leads them to log in)."""
    if user is None:
        return comp.participation == "open" and not comp.terms
    return not user.email_verify_pending and status_of(session, comp, user) == "approved"


def check_may_submit(session: Session, comp: Competition, user: User) -> None:
    """Raise ForbiddenError (`participation.required`) unless `user` may submit to `comp`
    (`account.unverified` while a new account's e-mail address waits for verification)."""
    check_verified(user)
    status = status_of(session, comp, user)
    if status == "approved":
        return
    why = {"none": "you have not accepted its terms" if comp.terms
           else "you have not asked to take part",
           "pending": "your request is waiting for the organizers",
           "denied": "the organizers denied your request"}[status]
    needs = "the organizers' approval" if comp.participation == "approval" \
        else "accepting its terms"
    join = f"arena join {comp.slug}" + (" --accept-terms" if comp.terms else "")
    raise ForbiddenError(
        f"competition {comp.slug!r} needs {needs} to take part, and {why}; "
        f"join on its page or with `{join}` (POST /api/v1/competitions/{comp.id}/participation)"
        " and submit once approved", code="participation.required", status=status)


def request_participation(session: Session, comp: Competition, user: User,
                          now: datetime, accept_terms: bool = False) -> str:
    """Ask to take part (accepting the terms, when the competition has them); returns the
    caller's status afterwards (idempotent). Raises InvalidInputError
    (`participation.terms`) when terms exist and were not accepted, ForbiddenError
    (`account.unverified`) before a new account verified its address."""
    check_verified(user)
    status = status_of(session, comp, user)
    if status != "none":
        return status
    if comp.terms and not accept_terms:
        raise InvalidInputError(
            f"competition {comp.slug!r} has terms to accept before taking part; read them on "
            "its page (Terms tab) and accept them there, or with "
            f"`arena join {comp.slug} --accept-terms`", code="participation.terms")
    row = member(session, comp.id, user.id)
    status = "pending" if comp.participation == "approval" else "approved"
    if row is None:
        row = CompetitionMember(competition_id=comp.id, user_id=user.id, status=status,
                                requested_at=now)
        session.add(row)
    row.accepted_terms_at = now if comp.terms else None
    session.add(AuditLog(actor_id=user.id, action="participation.join",
                         target=f"competition:{comp.id}",
                         details={"status": row.status, "terms": bool(comp.terms)}, at=now))
    session.commit()
    return row.status


def decide(session: Session, comp: Competition, user_id: int, approve: bool, actor: User,
           now: datetime) -> CompetitionMember:
    """Approve or deny a participant who asked to join `comp`, submitted to it, or whom
    `actor` created (admins: anyone). NotFoundError otherwise: the account stays unseen."""
    row = member(session, comp.id, user_id)
    if session.get(User, user_id) is None or (row is None and not _may_decide(
            session, comp, user_id, actor)):
        raise NotFoundError(f"no request to join {comp.slug!r} from user {user_id}; decide on "
                            f"the requests listed by `arena participants {comp.slug}` "
                            f"(GET /api/v1/competitions/{comp.id}/participants). A participant "
                            f"asks on the competition's page or with `arena join {comp.slug}`",
                            code="participation.no_request")
    if row is None:
        row = CompetitionMember(competition_id=comp.id, user_id=user_id, requested_at=now)
        session.add(row)
    row.status = "approved" if approve else "denied"
    row.decided_at, row.decided_by = now, actor.id
    session.add(AuditLog(actor_id=actor.id, action=f"participation.{row.status}",
                         target=f"competition:{comp.id}", details={"user_id": user_id}, at=now))
    session.commit()
    return row


def _may_decide(session: Session, comp: Competition, user_id: int, actor: User) -> bool:
    """Without a request: admins, an account `actor` created, or one that submitted here."""
    if is_admin(actor) or user_id in created_user_ids(session, actor):
        return True
    return session.execute(select(Submission.id).join(Phase, Phase.id == Submission.phase_id)
                           .where(Phase.competition_id == comp.id,
                                  Submission.user_id == user_id).limit(1)).first() is not None


def set_mode(session: Session, comp: Competition, mode: str, actor: User, now: datetime) -> None:
    if mode not in PARTICIPATION_MODES:
        raise InvalidInputError(f"participation mode {mode!r}; expected one of "
                                f"{list(PARTICIPATION_MODES)}", code="participation.bad_mode")
    comp.participation = mode
    session.add(AuditLog(actor_id=actor.id, action="participation.mode",
                         target=f"competition:{comp.id}", details={"mode": mode}, at=now))
    session.commit()


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
