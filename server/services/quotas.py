"""Atomic quota checks: per day, in total and in flight, per (user, phase).

The check and the insert it guards must be one critical section, otherwise two simultaneous
uploads both see one slot left and both take it. We serialize on the user's Participation row:
on Postgres with SELECT ... FOR UPDATE (the row is created first with ON CONFLICT DO NOTHING, so
even a first upload has a row to lock); on SQLite the caller's session began with BEGIN
IMMEDIATE, which holds the database write lock from the first statement. Submissions that ended
in a platform error, and submissions the platform carried into a final phase, are never charged.

A member of a team (issue 23) spends the team's quota: its submissions, and those of everyone
in it now (so leaving a team for a fresh quota gains nothing), counted under a lock on the
team's row (`lock_team`), so two members cannot both take the team's last slot.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import and_, func, not_, or_, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from server.core.errors import QuotaExceededError
from server.models import (
    PLATFORM_ERROR,
    TERMINAL_STATES,
    Participation,
    Phase,
    Submission,
    Team,
    TeamMember,
    utcnow,
)


def team_id_of(session: Session, user_id: int, competition_id: int) -> int | None:
    """The id of the team `user_id` belongs to in the competition, or None."""
    return session.execute(select(TeamMember.team_id).where(
        TeamMember.competition_id == competition_id,
        TeamMember.user_id == user_id)).scalar_one_or_none()


def lock_team(session: Session, team_id: int) -> None:
    """Lock the team's row until the transaction ends (SQLite: BEGIN IMMEDIATE already)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(Team.id).where(Team.id == team_id).with_for_update())


def _spender(session: Session, user_id: int, phase: Phase):
    """Whose submissions count: the user's, or their team's and its members'."""
    team_id = team_id_of(session, user_id, phase.competition_id)
    if team_id is None:
        return Submission.user_id == user_id
    members = select(TeamMember.user_id).where(TeamMember.team_id == team_id)
    return or_(Submission.team_id == team_id, Submission.user_id.in_(members))


def lock_participation(session: Session, user_id: int, phase_id: int) -> Participation:
    """Create (if missing) and lock the (user, phase) row until the transaction ends."""
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    stmt = insert(Participation).values(user_id=user_id, phase_id=phase_id, n_uploads=0,
                                        created_at=utcnow())
    session.execute(stmt.on_conflict_do_nothing(index_elements=["user_id", "phase_id"]))
    query = select(Participation).where(
        Participation.user_id == user_id, Participation.phase_id == phase_id
    )
    if dialect == "postgresql":
        query = query.with_for_update()
    return session.execute(query.execution_options(populate_existing=True)).scalar_one()


def _charged():
    """Counted against a quota: not a platform failure, not carried in by the platform."""
    return and_(Submission.charged.is_(True),
                not_(and_(Submission.state == "failed", Submission.reason == PLATFORM_ERROR)))


def check_quota(session: Session, user_id: int, phase: Phase, now: datetime) -> None:
    """Raise QuotaExceededError when one more submission would break a phase quota.

    Call with the Participation row locked (see lock_participation).
    """
    base = select(func.count(Submission.id)).where(
        _spender(session, user_id, phase), Submission.phase_id == phase.id
    )
    day_start = now.replace(hour=0, minute=0, second=0, microsecond=0)
    checks = [
        (phase.quota_total, base.where(_charged()), "total", "for the whole phase"),
        (phase.quota_per_day, base.where(_charged(), Submission.created_at >= day_start),
         "per_day", f"per UTC day (resets at {(day_start + timedelta(days=1)).isoformat()})"),
        (phase.quota_in_flight, base.where(Submission.state.not_in(TERMINAL_STATES)),
         "in_flight", "waiting or running at once (wait for one to finish)"),
    ]
    for limit, query, kind, scope in checks:
        if limit is None:
            continue
        used = session.execute(query).scalar_one()
        if used >= limit:
            raise QuotaExceededError(
                f"quota reached: {used} of {limit} submissions {scope} in phase {phase.id}; "
                "submissions that failed for platform reasons are not counted",
                code=f"quota.{kind}", used=used, limit=limit,
            )


def quota_left(session: Session, user_id: int, phase: Phase, now: datetime) -> dict | None:
    """What `user_id` may still submit to `phase` at `now`, counted as `check_quota` counts
    (read-only, no lock: for display, the upload re-checks). None when the phase sets no quota.

    Returns {"per_day": (left, limit) | None, "total": ..., "in_flight": ..., "resets_at": dt}.
    """
    if phase.quota_per_day is None and phase.quota_total is None \
            and phase.quota_in_flight is None:
        return None
    base = select(func.count(Submission.id)).where(
        _spender(session, user_id, phase), Submission.phase_id == phase.id)
    day_start = now.replace(hour=0, minute=0, second=0, microsecond=0)
    queries = {"per_day": (phase.quota_per_day,
                           base.where(_charged(), Submission.created_at >= day_start)),
               "total": (phase.quota_total, base.where(_charged())),
               "in_flight": (phase.quota_in_flight,
                             base.where(Submission.state.not_in(TERMINAL_STATES)))}
    out: dict = {"resets_at": day_start + timedelta(days=1)}
    for kind, (limit, query) in queries.items():
        out[kind] = None if limit is None else (
            max(0, limit - session.execute(query).scalar_one()), limit)
    return out
