"""Operations on submissions: cancel, re-run, select, flag as baseline.

- Cancel (owner or organizer): a queued run is cancelled at once (its token is revoked, so a
  job already on the broker gets 401 and drops); a running run is marked cancel-requested and
  stops at its worker's next heartbeat (see services/runs.py).
- Re-run (organizer): the submission's current runs must all be over. They are kept as
  history (`superseded_at`) and new runs with the same seeds and fresh tokens are added; the
  submission's state and score then come from the new runs only. Never charged to a quota.
- Select (owner, or a current member of its team): the submission that represents its
  competitor (the team in a team competition, else its owner) on the leaderboard of its phase
  and league, and the one carried into a final phase; allowed until the phase closes. Team
  membership is read now, never the submission's `team_id` alone: a member who left or was
  removed chooses nothing for the team, not even with a submission they made for it.
- Baseline (organizer): a reference entry, marked on the leaderboard and always carried.
Every action by staff is written to the audit log in the same transaction.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from server.core.errors import ConflictError, ForbiddenError, NotFoundError
from server.core.security import hash_token, new_token
from server.models import ACTIVE_STATES, TERMINAL_STATES, AuditLog, Phase, Run, Submission, User
from server.services import tenancy
from server.services.competitions import check_phase_data
from server.services.run_transitions import guarded_update, move_run
from server.services.runs import cancelled_values
from server.services.submissions import in_team_of, refresh_submission
from submission_api.contract.states import RunState

Job = tuple[int, str, str]


def check_organizes(session: Session, phase: Phase, user: User) -> None:
    """404 unless `user` organizes the phase's competition (admins organize all)."""
    tenancy.check_organizes(session, user, phase.competition_id)


def get_operable_submission(session: Session, submission_id: int, user: User,
                            organizer_only: bool = False) -> Submission:
    """The submission if `user` owns it (unless organizer_only) or organizes its competition."""
    submission = session.get(Submission, submission_id)
    missing = NotFoundError(f"no submission with id {submission_id} among those you may "
                            "change; list yours at /api/v1/me/submissions")
    if submission is None:
        raise missing
    if not organizer_only and submission.user_id == user.id:
        return submission
    phase = session.get_one(Phase, submission.phase_id)
    if not tenancy.organizes(session, user, phase.competition_id):
        raise missing
    return submission


def current_runs(session: Session, submission_id: int) -> list[Run]:
    return list(session.execute(
        select(Run).where(Run.submission_id == submission_id, Run.superseded_at.is_(None))
        .order_by(Run.index).execution_options(populate_existing=True)).scalars())


def audit(session: Session, actor: User, action: str, target: str, now: datetime,
          **details: object) -> None:
    session.add(AuditLog(actor_id=actor.id, action=action, target=target, details=details,
                         at=now))


def cancel_submission(session: Session, submission: Submission, actor: User,
                      now: datetime) -> Submission:
    """Cancel queued runs now, mark active ones; 409 when nothing is left to cancel."""
    touched = 0
    for run in current_runs(session, submission.id):
        if run.state == RunState.QUEUED:
            touched += move_run(session, run.id, RunState.CANCELLED, cancelled_values(now),
                                among=[RunState.QUEUED])
        elif run.state in ACTIVE_STATES and run.cancel_requested_at is None:
            touched += guarded_update(session, run.id, [Run.state.in_(ACTIVE_STATES)],
                                      {"cancel_requested_at": now})
    if not touched:
        raise ConflictError(f"submission {submission.id} is {submission.state!r}: nothing "
                            "is waiting or running, so there is nothing to cancel",
                            code="submission.not_cancellable")
    if actor.id != submission.user_id:
        audit(session, actor, "submission.cancel", f"submission:{submission.id}", now)
    return refresh_submission(session, submission.id, now)


def rerun_submission(session: Session, submission: Submission, actor: User, now: datetime,
                     queue_name: str, reason: str = "") -> list[Job]:
    """Supersede the current runs and add fresh ones; returns the jobs to enqueue. `reason`
    (why the organizer re-runs it) is audited and shown on the submission's page.

    Raises InvalidInputError when the phase names data its organizer may not use (whatever
    the phase's status), ConflictError while a run is still busy."""
    check_phase_data(session, session.get_one(Phase, submission.phase_id), actor)
    runs = current_runs(session, submission.id)
    if any(r.state not in TERMINAL_STATES for r in runs):
        raise ConflictError(f"submission {submission.id} still has runs waiting or running; "
                            "cancel it or wait for it to end before re-running",
                            code="submission.busy")
    next_index = session.execute(select(func.max(Run.index)).where(
        Run.submission_id == submission.id)).scalar_one()
    session.execute(update(Run).where(Run.id.in_([r.id for r in runs]))
                    .values(superseded_at=now).execution_options(synchronize_session=False))
    jobs = []
    for offset, old in enumerate(runs):
        token = new_token()
        run = Run(submission_id=submission.id, index=(next_index or 0) + 1 + offset,
                  seed=old.seed, state=RunState.QUEUED, run_token_hash=hash_token(token),
                  enqueued_at=now, created_at=now)
        session.add(run)
        session.flush()
        jobs.append((run.id, token, queue_name))
    refresh_submission(session, submission.id, now)
    audit(session, actor, "submission.rerun", f"submission:{submission.id}", now,
          superseded=[r.id for r in runs], new_runs=[j[0] for j in jobs],
          reason=reason.strip()[:500])
    return jobs


def select_submission(session: Session, submission: Submission, user: User, selected: bool,
                      now: datetime) -> Submission:
    """Make (or stop making) `submission` the one representing its competitor in its phase.

    Raises ForbiddenError (`team.not_member`) when the submission is a team's and `user` is
    not a member of that team now."""
    if submission.team_id is not None and not in_team_of(session, submission, user):
        raise ForbiddenError(f"submission {submission.id} belongs to a team you are no longer "
                             "in: only its current members choose the team's entry",
                             code="team.not_member")
    phase = session.get_one(Phase, submission.phase_id)
    if phase.closed_at is not None or phase.status == "closed":
        raise ConflictError(f"phase {phase.id} is closed; the selection can no longer change",
                            code="phase.closed")
    if selected and submission.disqualified_at is not None:
        raise ConflictError(f"submission {submission.id} was disqualified "
                            f"({submission.disqualified_reason}); it cannot represent you — "
                            "select another finished submission, or ask the organizers",
                            code="submission.disqualified")
    if selected and submission.state != "finished":
        raise ConflictError(f"submission {submission.id} is {submission.state!r}; only a "
                            "finished submission can represent you — wait for it to finish",
                            code="submission.not_finished")
    owner = (Submission.team_id == submission.team_id) if submission.team_id is not None \
        else (Submission.user_id == submission.user_id)  # a team selects one for all
    session.execute(update(Submission).where(
        Submission.phase_id == submission.phase_id, owner,
        Submission.league.is_not_distinct_from(submission.league),
    ).values(is_selected=False).execution_options(synchronize_session=False))
    session.execute(update(Submission).where(Submission.id == submission.id)
                    .values(is_selected=selected).execution_options(synchronize_session=False))
    session.refresh(submission)
    return submission


def flag_baseline(session: Session, submission: Submission, actor: User, baseline: bool,
                  now: datetime) -> Submission:
    submission.is_baseline = baseline
    audit(session, actor, "submission.baseline", f"submission:{submission.id}", now,
          baseline=baseline)
    session.flush()
    return submission
