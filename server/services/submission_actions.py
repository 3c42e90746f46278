"""The unit of work of each operation on one submission, for the JSON API and the web forms
alike: find what the user may change, change it (`server.services.operations`), commit, and
only then enqueue what the change made. Routes translate requests and errors only, so the two
front ends cannot drift apart (they did: selecting another user's submission answered 404 in
the API and 403 on the web; re-running was orchestrated twice).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from server.core.errors import NotFoundError
from server.models import Phase, Submission, User
from server.services import operations as ops
from server.services.disqualify import set_disqualified
from server.services.queue import JobQueue, enqueue_quietly
from server.services.submissions import in_team_of


def get_own_submission(session: Session, submission_id: int, user: User) -> Submission:
    """`user`'s own submission, or one of their current team's (team-mates choose the team's
    entry together); any other answers 404, exactly like an id that does not exist (a
    participant learns nothing of other submissions)."""
    submission = session.get(Submission, submission_id)
    if submission is None or (submission.user_id != user.id
                              and not in_team_of(session, submission, user)):
        raise NotFoundError(f"no submission with id {submission_id} among yours or your "
                            "team's; list yours at /api/v1/me/submissions")
    return submission


def cancel(session: Session, submission_id: int, user: User, now: datetime) -> Submission:
    """Cancel its queued runs now and mark its running ones (owner or organizer)."""
    submission = ops.get_operable_submission(session, submission_id, user)
    ops.cancel_submission(session, submission, user, now)
    session.commit()
    return submission


def select(session: Session, submission_id: int, user: User, selected: bool | None,
           now: datetime) -> Submission:
    """Make (`True`), stop making (`False`) or toggle (`None`) the submission the one
    representing its competitor (its owner, or its team: any current member) in its phase."""
    submission = get_own_submission(session, submission_id, user)
    wanted = (not submission.is_selected) if selected is None else selected
    ops.select_submission(session, submission, user, wanted, now)
    session.commit()
    return submission


def flag_baseline(session: Session, submission_id: int, user: User, baseline: bool | None,
                  now: datetime) -> Submission:
    """Flag, unflag or toggle (`None`) a baseline (organizer of its competition)."""
    submission = ops.get_operable_submission(session, submission_id, user, organizer_only=True)
    wanted = (not submission.is_baseline) if baseline is None else baseline
    ops.flag_baseline(session, submission, user, wanted, now)
    session.commit()
    return submission


def rerun(session: Session, submission_id: int, user: User, now: datetime, default_queue: str,
          queue: JobQueue, reason: str = "") -> list[int]:
    """New runs with the same seeds (organizer of its competition); the ids of the new runs.
    `reason` (why) is audited and shown on the submission's page. Their jobs are sent after the
    commit: a worker never sees an uncommitted run."""
    submission = ops.get_operable_submission(session, submission_id, user, organizer_only=True)
    phase = session.get_one(Phase, submission.phase_id)
    jobs = ops.rerun_submission(session, submission, user, now, phase.queue or default_queue,
                                reason)
    session.commit()
    enqueue_quietly(queue, jobs)
    return [job[0] for job in jobs]


def disqualify(session: Session, submission_id: int, user: User, disqualified: bool | None,
               reason: str, now: datetime) -> Submission:
    """Disqualify (`True`, with a required `reason`), reinstate (`False`) or toggle (`None`) a
    submission and its carry family (organizer of its competition; services/disqualify.py)."""
    submission = ops.get_operable_submission(session, submission_id, user, organizer_only=True)
    wanted = (submission.disqualified_at is None) if disqualified is None else disqualified
    set_disqualified(session, submission, user, wanted, reason, now)
    session.commit()
    return submission


def audit_download(session: Session, submission_id: int, user: User,
                   now: datetime) -> Submission:
    """The submission whose zip `user` may download (owner or organizer); an organizer's
    download is written to the audit log."""
    submission = ops.get_operable_submission(session, submission_id, user)
    if submission.user_id != user.id:
        ops.audit(session, user, "submission.download", f"submission:{submission.id}", now)
        session.commit()
    return submission
