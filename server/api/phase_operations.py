"""Organizer actions on a whole phase: close it (carrying its chosen submissions into the
final phase), re-run its submissions, and publish a closed phase's results (services/
secrecy.py). All are audited; jobs are enqueued after commit."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from sqlalchemy import select

from server.api.competitions import phase_out
from server.api.deps import NowDep, Organizer, SettingsDep, WriteSessionDep, get_queue
from server.core.errors import NotFoundError
from server.models import TERMINAL_STATES, Phase, Submission
from server.schemas.competition import PhaseOut
from server.schemas.operations import CloseOut, RerunOut
from server.services.finals import close_phase
from server.services.operations import check_organizes, current_runs, rerun_submission
from server.services.queue import JobQueue, enqueue_quietly
from server.services.secrecy import publish_results

router = APIRouter(prefix="/api/v1", tags=["phases"])
QueueDep = Annotated[JobQueue, Depends(get_queue)]


def organized_phase(session, phase_id: int, user) -> Phase:
    phase = session.get(Phase, phase_id)
    if phase is None:
        raise NotFoundError(f"no phase with id {phase_id} among those you organize")
    check_organizes(session, phase, user)
    return phase


@router.post("/phases/{phase_id}/close", response_model=CloseOut)
def close(phase_id: int, user: Organizer, session: WriteSessionDep, now: NowDep,
          settings: SettingsDep, queue: QueueDep) -> CloseOut:
    """Close the phase now; its chosen submissions above each league's threshold enter the
    phases that carry from it, evaluated there with that phase's runs and seeds."""
    phase = organized_phase(session, phase_id, user)
    report, jobs = close_phase(session, phase, user, now, settings.default_queue)
    session.commit()
    enqueue_quietly(queue, jobs)
    return CloseOut(phase_id=phase.id, carried=report.carried, below_threshold=report.skipped,
                    summary=report.summary)


@router.post("/phases/{phase_id}/publish", response_model=PhaseOut)
def publish(phase_id: int, user: Organizer, session: WriteSessionDep, now: NowDep) -> PhaseOut:
    """Reveal a closed phase's board and its owners' scores and detailed results, withheld
    until now when the phase hides scores or its test data is secret (meta-test output stays
    with the organizers). Audited; cannot be undone."""
    phase = organized_phase(session, phase_id, user)
    publish_results(session, phase, user, now)
    session.commit()
    return phase_out(phase, now, staff=True)


@router.post("/phases/{phase_id}/rerun", response_model=RerunOut)
def rerun_phase(phase_id: int, user: Organizer, session: WriteSessionDep, now: NowDep,
                settings: SettingsDep, queue: QueueDep, state: str | None = None) -> RerunOut:
    """Re-run every submission of the phase whose runs are over (optionally only those in
    `state`, e.g. `failed`); old runs stay as history. Busy submissions are skipped."""
    phase = organized_phase(session, phase_id, user)
    query = select(Submission).where(Submission.phase_id == phase.id).order_by(Submission.id)
    if state:
        query = query.where(Submission.state == state)
    done, skipped, jobs = [], [], []
    for submission in session.execute(query).scalars().all():
        if any(r.state not in TERMINAL_STATES for r in current_runs(session, submission.id)):
            skipped.append(submission.id)
            continue
        jobs += rerun_submission(session, submission, user, now,
                                 phase.queue or settings.default_queue)
        done.append(submission.id)
    session.commit()
    enqueue_quietly(queue, jobs)
    return RerunOut(submission_ids=done, run_ids=[j[0] for j in jobs], skipped=skipped)
