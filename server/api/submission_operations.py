"""Operations on one submission: cancel (owner or organizer), re-run and baseline flag
(organizer), select (owner), and downloading the stored zip (owner or organizer).
Another participant's submission answers 404, exactly like an id that does not exist."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import FileResponse

from server.api.deps import (
    CurrentUser,
    NowDep,
    Organizer,
    SessionDep,
    SettingsDep,
    WriteSessionDep,
    get_queue,
    get_storage,
)
from server.api.submissions import submission_out
from server.core.errors import NotFoundError
from server.models import Phase, Submission
from server.schemas.operations import BaselineRequest, RerunOut, SelectRequest
from server.schemas.submission import SubmissionOut
from server.services import operations as ops
from server.services.queue import JobQueue, enqueue_quietly
from server.services.storage import Storage

router = APIRouter(prefix="/api/v1", tags=["submissions"])


@router.post("/submissions/{submission_id}/cancel", response_model=SubmissionOut)
def cancel(submission_id: int, user: CurrentUser, session: WriteSessionDep, now: NowDep,
           settings: SettingsDep) -> SubmissionOut:
    """Queued runs are cancelled now; running ones stop at their worker's next heartbeat."""
    submission = ops.get_operable_submission(session, submission_id, user)
    ops.cancel_submission(session, submission, user, now)
    session.commit()
    return submission_out(session, session.get(Submission, submission_id), settings, user)


@router.post("/submissions/{submission_id}/rerun", response_model=RerunOut)
def rerun(submission_id: int, user: Organizer, session: WriteSessionDep, now: NowDep,
          settings: SettingsDep,
          queue: Annotated[JobQueue, Depends(get_queue)]) -> RerunOut:
    """New runs (same seeds, fresh tokens); the old ones are kept as history."""
    submission = ops.get_operable_submission(session, submission_id, user, organizer_only=True)
    phase = session.get(Phase, submission.phase_id)
    jobs = ops.rerun_submission(session, submission, user, now,
                                phase.queue or settings.default_queue)
    session.commit()
    enqueue_quietly(queue, jobs)
    return RerunOut(submission_ids=[submission_id], run_ids=[j[0] for j in jobs])


@router.post("/submissions/{submission_id}/select", response_model=SubmissionOut)
def select_submission(submission_id: int, user: CurrentUser, session: WriteSessionDep,
                      now: NowDep, settings: SettingsDep,
                      body: SelectRequest | None = None) -> SubmissionOut:
    """Choose the finished submission that represents you in its phase (and is carried into
    the final); `{"selected": false}` goes back to the phase rule."""
    submission = session.get(Submission, submission_id)
    if submission is None or submission.user_id != user.id:
        raise NotFoundError(f"no submission with id {submission_id} among yours; list "
                                "yours at /api/v1/me/submissions")
    selected = True if body is None else body.selected
    ops.select_submission(session, submission, user, selected, now)
    session.commit()
    return submission_out(session, submission, settings, user)


@router.post("/submissions/{submission_id}/baseline", response_model=SubmissionOut)
def baseline(submission_id: int, user: Organizer, session: WriteSessionDep, now: NowDep,
             settings: SettingsDep, body: BaselineRequest | None = None) -> SubmissionOut:
    """Flag (or unflag) a submission as a baseline: marked on the board, always carried."""
    submission = ops.get_operable_submission(session, submission_id, user, organizer_only=True)
    ops.flag_baseline(session, submission, user, True if body is None else body.baseline, now)
    session.commit()
    return submission_out(session, submission, settings, user)


@router.get("/submissions/{submission_id}/download", response_class=FileResponse)
def download(submission_id: int, user: CurrentUser, session: SessionDep, now: NowDep,
             storage: Annotated[Storage, Depends(get_storage)]) -> FileResponse:
    """The stored zip, for its owner or an organizer of its competition (audited)."""
    submission = ops.get_operable_submission(session, submission_id, user)
    if submission.user_id != user.id:
        ops.audit(session, user, "submission.download", f"submission:{submission.id}", now)
        session.commit()
    return FileResponse(storage.absolute(submission.storage_path), media_type="application/zip",
                        filename=f"submission-{submission.id}.zip")
