"""Organizer actions on a whole phase: close it (carrying its chosen submissions into the
final phase), re-run its submissions, and publish a closed phase's results (services/
secrecy.py). All are audited; services/phase_actions.py commits each, and the jobs are
enqueued after that commit."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from server.api.competitions import phase_out
from server.api.deps import NowDep, Organizer, SettingsDep, WriteSessionDep, get_queue
from server.schemas.competition import PhaseOut
from server.schemas.operations import CloseOut, RerunOut
from server.services import phase_actions
from server.services.queue import JobQueue, enqueue_quietly

router = APIRouter(prefix="/api/v1", tags=["phases"])
QueueDep = Annotated[JobQueue, Depends(get_queue)]


@router.post("/phases/{phase_id}/close", response_model=CloseOut)
def close(phase_id: int, user: Organizer, session: WriteSessionDep, now: NowDep,
          settings: SettingsDep, queue: QueueDep) -> CloseOut:
    """Close the phase now; its chosen submissions above each league's threshold enter the
    phases that carry from it, evaluated there with that phase's runs and seeds."""
    phase, report, jobs = phase_actions.close_now(session, phase_id, user, now,
                                                  settings.default_queue)
    enqueue_quietly(queue, jobs)
    return CloseOut(phase_id=phase.id, carried=report.carried, below_threshold=report.skipped,
                    summary=report.summary)


@router.post("/phases/{phase_id}/publish", response_model=PhaseOut)
def publish(phase_id: int, user: Organizer, session: WriteSessionDep, now: NowDep) -> PhaseOut:
    """Reveal a closed phase's board and its owners' scores and detailed results, withheld
    until now when the phase hides scores or its test data is secret (meta-test output stays
    with the organizers). Audited; cannot be undone."""
    phase = phase_actions.publish_now(session, phase_id, user, now)
    return phase_out(phase, now, staff=True)


@router.post("/phases/{phase_id}/rerun", response_model=RerunOut)
def rerun_phase(phase_id: int, user: Organizer, session: WriteSessionDep, now: NowDep,
                settings: SettingsDep, queue: QueueDep, state: str | None = None) -> RerunOut:
    """Re-run every submission of the phase whose runs are over (optionally only those in
    `state`, e.g. `failed`); old runs stay as history. Busy submissions are skipped."""
    done = phase_actions.rerun_phase(session, phase_id, user, now, settings.default_queue,
                                     state)
    enqueue_quietly(queue, done.jobs)
    return RerunOut(submission_ids=done.submission_ids, run_ids=[j[0] for j in done.jobs],
                    skipped=done.skipped)
