"""Tenancy, as one rule: an organizer reads and changes only the competitions they organize —
phases of every status, their seeds and dataset hashes, the runs and logs of their
submissions, the accounts that take part in them — whatever the route; admins see all.

Every organizer-visible query goes through these helpers, so "which competitions does this
user organize" is decided here only (today: the competitions they own). A route or page asks
`organizes` for one object, or narrows a query with `organized_competition_ids` /
`organized_phase_ids`; nothing else compares `Competition.owner_id` with a user.

Accounts follow the same rule (`managed_user_ids`): an organizer manages the participants they
created and those who take part in one of their competitions (a submission, a participation
row, a request to join: approval needs one, services/participation.py, so approving cannot make
an arbitrary account managed); every other account is invisible to them. Taking over an account
(a password-reset link, `may_reset_password`) is narrower still: an organizer resets only the
participants they created, never an account that signed up itself and merely takes part (it
may take part in other organizers' competitions too); those reset by mail or through an admin.
"""

from __future__ import annotations

from typing import TypeGuard

from sqlalchemy import ColumnElement, Select, select, union
from sqlalchemy.orm import Session

from server.core.errors import NotFoundError
from server.models import (
    AuditLog,
    Competition,
    CompetitionMember,
    Participation,
    Phase,
    Submission,
    User,
)


def is_admin(user: User | None) -> bool:
    return user is not None and user.role == "admin"


def is_staff(user: User | None) -> TypeGuard[User]:
    """An organizer or admin: may use staff routes, but sees only what `organizes` allows."""
    return user is not None and user.role in ("organizer", "admin")


def organized_competition_ids(user: User) -> Select[int]:
    """A select of the ids of the competitions `user` organizes (all of them for admins)."""
    query = select(Competition.id)
    return query if is_admin(user) else query.where(Competition.owner_id == user.id)


def organized_phase_ids(user: User) -> Select[int]:
    """A select of the ids of the phases of the competitions `user` organizes."""
    return select(Phase.id).where(Phase.competition_id.in_(organized_competition_ids(user)))


def visible_competitions_query(user: User | None) -> Select[Competition]:
    """Competitions `user` may see, by id: those with a phase past draft, and the ones they
    organize (drafts and all). The same rule as `organizes_competition`, in SQL, so a listing
    can be paginated (issue 21)."""
    shown: ColumnElement[bool] = select(Phase.id).where(Phase.competition_id == Competition.id,
                                                        Phase.status != "draft").exists()
    if is_staff(user):
        shown = shown | Competition.id.in_(organized_competition_ids(user))
    return select(Competition).where(shown).order_by(Competition.id)


def organizes_competition(user: User | None, comp: Competition | None) -> bool:
    """Whether `user` organizes `comp` (admins organize all): the rule itself."""
    if user is None or not is_staff(user) or comp is None:
        return False
    return is_admin(user) or (comp.owner_id is not None and comp.owner_id == user.id)


def organizes(session: Session, user: User | None, competition_id: int | None) -> bool:
    """Whether `user` organizes competition `competition_id` (admins organize all)."""
    if not is_staff(user) or competition_id is None:
        return False
    return organizes_competition(user, session.get(Competition, competition_id))


def visible_phase(session: Session, phase_id: int, user: User | None) -> Phase:
    """A phase the caller may see: drafts only for its organizers; 404 otherwise, as for a
    phase that does not exist (every JSON route and page asks here)."""
    phase = session.get(Phase, phase_id)
    if phase is None or (phase.status == "draft"
                         and not organizes_competition(user, phase.competition)):
        raise NotFoundError(f"no phase with id {phase_id}; list phases at /api/v1/phases")
    return phase


def organizes_phase(session: Session, user: User | None, phase: Phase | None) -> bool:
    return phase is not None and organizes(session, user, phase.competition_id)


def check_organizes(session: Session, user: User, competition_id: int) -> Competition:
    """The competition, if `user` organizes it; NotFoundError otherwise (never say it exists)."""
    comp = session.get(Competition, competition_id)
    if comp is None or not organizes(session, user, comp.id):
        raise NotFoundError(f"no competition with id {competition_id} among those you organize")
    return comp


def managed_user_ids(session: Session, user: User) -> set[int] | None:
    """Ids of the accounts `user` manages; None for an admin (every account).

    An organizer manages the accounts they created and those that take part in a competition
    they organize (submitted to, hold a participation row in, or asked to join one)."""
    if is_admin(user):
        return None
    phases = organized_phase_ids(user)
    comps = organized_competition_ids(user)
    taking_part = union(
        select(Submission.user_id).where(Submission.phase_id.in_(phases)),
        select(Participation.user_id).where(Participation.phase_id.in_(phases)),
        select(CompetitionMember.user_id).where(CompetitionMember.competition_id.in_(comps)))
    return set(session.execute(taking_part).scalars()) | created_user_ids(session, user)


def created_user_ids(session: Session, user: User) -> set[int]:
    """Ids of the accounts `user` created (`arena user create`, POST /api/v1/users)."""
    created = session.execute(select(AuditLog.target).where(
        AuditLog.action == "user.create", AuditLog.actor_id == user.id)).scalars()
    return {int(t.split(":", 1)[1]) for t in created if t.split(":", 1)[-1].isdigit()}


def may_reset_password(session: Session, actor: User, target: User) -> bool:
    """Whether `actor` may issue a password-reset link for `target` (a takeover: whoever holds
    the link sets the password): admins for anyone, organizers for participants they created."""
    if is_admin(actor):
        return True
    return (is_staff(actor) and target.role == "participant"
            and target.id in created_user_ids(session, actor))
