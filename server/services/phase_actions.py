"""An organizer's actions on a whole phase over the API, each one committed unit of work
(docs/internals.md, "Commits"): close it (carrying its chosen entries into the phases that
carry from it), publish its results, re-run its submissions.

Each finds the phase among those the user organizes, calls the services that write (finals,
secrecy, operations) and commits once at its end; the jobs it returns are for the caller to
enqueue after that commit (a worker never sees an unwritten run). The API's routes and the web
dashboard's forms (web/organizer.py) both call them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core.errors import NotFoundError
from server.models import TERMINAL_STATES, Phase, Submission, User
from server.services.finals import CloseReport, close_phase
from server.services.operations import Job, check_organizes, current_runs, rerun_submission
from server.services.secrecy import publish_results


def organized_phase(session: Session, phase_id: int, user: User) -> Phase:
    """Phase `phase_id` if `user` organizes it; the same 404 as an unknown id otherwise."""
    phase = session.get(Phase, phase_id)
    if phase is None:
        raise NotFoundError(f"no phase with id {phase_id} among those you organize")
    check_organizes(session, phase, user)
    return phase


def close_now(session: Session, phase_id: int, user: User, now: datetime,
              default_queue: str) -> tuple[Phase, CloseReport, list[Job]]:
    """Close the phase now (finals.close_phase), committed; returns the carried runs' jobs."""
    phase = organized_phase(session, phase_id, user)
    report, jobs = close_phase(session, phase, user, now, default_queue)
    session.commit()
    return phase, report, jobs


def publish_now(session: Session, phase_id: int, user: User, now: datetime) -> Phase:
    """Publish a closed phase's results (secrecy.publish_results), committed."""
    phase = organized_phase(session, phase_id, user)
    publish_results(session, phase, user, now)
    session.commit()
    return phase


@dataclass
class PhaseRerun:
    """What a phase's re-run did: the submissions re-run, their jobs, the busy ones skipped."""

    submission_ids: list[int] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)


def rerun_phase(session: Session, phase_id: int, user: User, now: datetime,
                default_queue: str, state: str | None = None) -> PhaseRerun:
    """Re-run every submission of the phase whose runs are over (only those in `state` when
    given), committed; a submission with a run still waiting or running is skipped."""
    phase = organized_phase(session, phase_id, user)
    query = select(Submission).where(Submission.phase_id == phase.id).order_by(Submission.id)
    if state:
        query = query.where(Submission.state == state)
    done = PhaseRerun()
    for submission in session.execute(query).scalars().all():
        if any(r.state not in TERMINAL_STATES for r in current_runs(session, submission.id)):
            done.skipped.append(submission.id)
            continue
        done.jobs += rerun_submission(session, submission, user, now,
                                      phase.queue or default_queue)
        done.submission_ids.append(submission.id)
    session.commit()
    return done
