"""Atomic quota checks: per day, in total and in flight, per (user, phase).

The check and the insert it guards must be one critical section, otherwise two simultaneous
uploads both see one slot left and both take it. We serialize on the user's Participation row:
on Postgres with SELECT ... FOR UPDATE (the row is created first with ON CONFLICT DO NOTHING, so
even a first upload has a row to lock); on SQLite the caller's session began with BEGIN
IMMEDIATE, which holds the database write lock from the first statement. Submissions that ended
in a platform error, and submissions the platform carried into a final phase, are never charged.

A member of a team (issue 23) spends the team's quota: its submissions, and those charged to
everyone in it now, counted under a lock on the team's row (`lock_team`), so two members cannot
both take the team's last slot. A submission is charged to whoever used it (issue 33.5): its
maker, and everyone who was in the maker's team when it was made (`TeamStint` windows), so no
change of team refills anyone's quota: leaving and submitting alone, or leaving and founding a
fresh team, still counts what the old team spent meanwhile. A join that would put the team past
a quota of a phase still open is refused (`check_join_within_quota`), so leaving, submitting
alone and coming back cannot give a team more than its quota.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, func, not_, or_, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, aliased

from server.core.errors import ConflictError, QuotaExceededError
from server.models import (
    PLATFORM_ERROR,
    TERMINAL_STATES,
    Participation,
    Phase,
    Submission,
    Team,
    TeamMember,
    TeamStint,
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


def _in_window(stint: type[TeamStint]) -> ColumnElement[bool]:
    return and_(stint.joined_at <= Submission.created_at,
                or_(stint.left_at.is_(None), stint.left_at > Submission.created_at))


def charged_to(people: list[int] | Select[int], competition_id: int) -> ColumnElement[bool]:
    """Submissions charged to `people`: their own, and those made by a team-mate of theirs
    while both were in one team of the competition (whatever team the submission is in now)."""
    mine, fellow = aliased(TeamStint), aliased(TeamStint)
    shared = select(mine.id).join(fellow, fellow.team_id == mine.team_id).where(
        mine.user_id.in_(people), mine.competition_id == competition_id,
        fellow.user_id == Submission.user_id, _in_window(mine), _in_window(fellow)).exists()
    return or_(Submission.user_id.in_(people), shared)


def _spender(session: Session, user_id: int, phase: Phase) -> ColumnElement[bool]:
    """Whose submissions count: the user's, or their team's and those charged to its members."""
    team_id = team_id_of(session, user_id, phase.competition_id)
    if team_id is None:
        return charged_to([user_id], phase.competition_id)
    members = select(TeamMember.user_id).where(TeamMember.team_id == team_id)
    return or_(Submission.team_id == team_id, charged_to(members, phase.competition_id))


def check_join_within_quota(session: Session, team: Team, user_id: int, now: datetime) -> None:
    """Raise ConflictError when `user_id` joining `team` would give it more submissions than a
    quota of a phase not closed allows (what the team holds plus what is charged to the
    newcomer). Call with the team's row locked (`lock_team`)."""
    people = [*session.execute(select(TeamMember.user_id).where(
        TeamMember.team_id == team.id)).scalars(), user_id]
    together = or_(Submission.team_id == team.id, charged_to(people, team.competition_id))
    day_start = now.replace(hour=0, minute=0, second=0, microsecond=0)
    phases = session.execute(select(Phase).where(
        Phase.competition_id == team.competition_id, Phase.status != "closed")).scalars()
    for phase in phases:
        base = select(func.count(Submission.id)).where(
            together, Submission.phase_id == phase.id, _charged())
        for limit, query, scope in (
                (phase.quota_total, base, "for the whole phase"),
                (phase.quota_per_day, base.where(Submission.created_at >= day_start),
                 f"per UTC day (join after {(day_start + timedelta(days=1)).isoformat()})")):
            used = session.execute(query).scalar_one() if limit is not None else 0
            if limit is not None and used > limit:
                raise ConflictError(
                    f"joining {team.name!r} would give the team {used} submissions in phase "
                    f"{phase.name!r}, past its quota of {limit} {scope}: the "
                    "submissions you made count with the team's", code="team.quota",
                    used=used, limit=limit)


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


def _charged() -> ColumnElement[bool]:
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


def quota_left(session: Session, user_id: int, phase: Phase,
               now: datetime) -> dict[str, Any] | None:
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
    out: dict[str, Any] = {"resets_at": day_start + timedelta(days=1)}
    for kind, (limit, query) in queries.items():
        out[kind] = None if limit is None else (
            max(0, limit - session.execute(query).scalar_one()), limit)
    return out
