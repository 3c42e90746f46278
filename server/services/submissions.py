"""A submission's state, reason and score derived from its runs, and read-side helpers.

`refresh_submission` is called inside every transaction that changes a run. It first locks the
submission row (FOR UPDATE on Postgres), so two runs of one submission finishing at once
serialize here and the second sees the first's committed state — otherwise both could read
"the other is still running" and leave the submission running forever. Runs superseded by a
re-run are history: they no longer count.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.core.errors import NotFoundError
from server.models import (
    ACTIVE_STATES,
    PLATFORM_ERROR,
    TERMINAL_STATES,
    Phase,
    PoolPhase,
    Run,
    Submission,
    TeamMember,
)
from server.models import User as UserModel
from server.services.queue_view import queue_label
from server.services.scores import aggregate_runs, refresh_run_scores
from server.services.tenancy import organizes_phase


def derive_state(runs: list[Run], protocol: dict[str, Any] | None = None
                 ) -> tuple[str, str | None, str | None, float | None]:
    """(state, reason, message, score) of a submission; score = the phase's aggregate of its
    runs (`services.scores`: per-dataset minimum over runs by default, as MetaDL ranked)."""
    states = [r.state for r in runs]
    if not all(s in TERMINAL_STATES for s in states):
        busy = any(s in ACTIVE_STATES or s in TERMINAL_STATES for s in states)
        return ("running" if busy else "queued"), None, None, None
    if all(s == "finished" for s in states):
        return "finished", None, None, aggregate_runs(runs, protocol).score
    # The participant's own fault is the most useful thing to show; platform faults last.
    by_priority = sorted(
        (r for r in runs if r.state != "finished"),
        key=lambda r: (r.reason == PLATFORM_ERROR, r.state == "cancelled", r.index),
    )
    first = by_priority[0]
    return first.state, first.reason, first.message, None


def refresh_submission(session: Session, submission_id: int, now: datetime) -> Submission:
    """Rewrite the cached state/reason/score of a submission from its runs (row locked)."""
    query = select(Submission).where(Submission.id == submission_id)
    if session.get_bind().dialect.name == "postgresql":
        query = query.with_for_update()
    submission = session.execute(query.execution_options(populate_existing=True)).scalar_one()
    runs = list(session.execute(
        select(Run).where(Run.submission_id == submission_id, Run.superseded_at.is_(None))
        .order_by(Run.index)
        .execution_options(populate_existing=True)
    ).scalars())
    phase = session.get(Phase, submission.phase_id)
    protocol = phase.protocol if phase else None
    refresh_run_scores(runs, protocol)
    state, reason, message, score = derive_state(runs, protocol)
    submission.state, submission.reason, submission.message = state, reason, message
    submission.score = score
    submission.finished_at = now if state in TERMINAL_STATES else None
    session.flush()
    return submission


def get_visible_submission(session: Session, submission_id: int, user: UserModel) -> Submission:
    """The submission if `user` may see it; 404 otherwise (never reveal others' ids)."""
    submission = session.get(Submission, submission_id)
    if submission is None or not _may_see(session, submission, user):
        raise NotFoundError(
            f"no submission with id {submission_id} among yours; list yours at "
            "/api/v1/me/submissions"
        )
    return submission


def _may_see(session: Session, submission: Submission, user: UserModel) -> bool:
    """Its owner, a current member of its team (the team is the competitor: a removed member
    sees none of its submissions but their own), an admin, or an organizer of its
    competition — not every organizer: the organizer of another competition must not read this
    one's logs and results."""
    if submission.user_id == user.id or in_team_of(session, submission, user):
        return True
    return organizes_phase(session, user, session.get(Phase, submission.phase_id))


def in_team_of(session: Session, submission: Submission, user: UserModel) -> bool:
    """True when `user` is a member, now, of the team `submission` was made for (membership is
    read at every call, never remembered: a removed member loses the team's submissions)."""
    if submission.team_id is None:
        return False
    return session.execute(select(TeamMember.id).where(
        TeamMember.team_id == submission.team_id, TeamMember.user_id == user.id)
    ).first() is not None


def queue_position(session: Session, submission: Submission, default_queue: str) -> int | None:
    """1-based position of the submission's first queued run in its phase's queue, or None."""
    first = session.execute(
        select(func.min(Run.id)).where(Run.submission_id == submission.id, Run.state == "queued")
    ).scalar_one()
    if first is None:
        return None
    line = queue_label(default_queue)  # a pool's phase waits in its pool's line (issue 37)
    name = session.execute(select(line).select_from(Phase).outerjoin(
        PoolPhase, PoolPhase.phase_id == Phase.id).where(Phase.id == submission.phase_id)
    ).scalar_one_or_none() or default_queue
    ahead = session.execute(
        select(func.count(Run.id)).join(Submission, Run.submission_id == Submission.id)
        .join(Phase, Submission.phase_id == Phase.id)
        .outerjoin(PoolPhase, PoolPhase.phase_id == Phase.id)
        .where(Run.state == "queued", Run.id < first, line == name)
    ).scalar_one()
    return ahead + 1
