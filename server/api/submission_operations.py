"""Operations on one submission: cancel (owner or organizer), re-run, baseline flag and
disqualification (organizer), select (owner or a current team-mate), and downloading the stored
zip (owner or organizer).
Another participant's submission answers 404, exactly like an id that does not exist. Each
route translates; `server.services.submission_actions` does the work and commits."""

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
from server.models import Submission
from server.schemas.operations import (
    BaselineRequest,
    DisqualifyRequest,
    RerunOut,
    SelectRequest,
)
from server.schemas.submission import SubmissionOut
from server.services import submission_actions as actions
from server.services.queue import JobQueue
from server.services.storage import Storage
from server.services.submission_view import submission_out

router = APIRouter(prefix="/api/v1", tags=["submissions"])


@router.post("/submissions/{submission_id}/cancel", response_model=SubmissionOut)
def cancel(submission_id: int, user: CurrentUser, session: WriteSessionDep, now: NowDep,
           settings: SettingsDep) -> SubmissionOut:
    """Queued runs are cancelled now; running ones stop at their worker's next heartbeat."""
    actions.cancel(session, submission_id, user, now)
    return submission_out(session, session.get_one(Submission, submission_id), settings, user)


@router.post("/submissions/{submission_id}/rerun", response_model=RerunOut)
def rerun(submission_id: int, user: Organizer, session: WriteSessionDep, now: NowDep,
          settings: SettingsDep,
          queue: Annotated[JobQueue, Depends(get_queue)], reason: str = "") -> RerunOut:
    """New runs (same seeds, fresh tokens); the old ones are kept as history. `reason` (why)
    is audited and shown on the submission's page."""
    run_ids = actions.rerun(session, submission_id, user, now, settings.default_queue, queue,
                            reason)
    return RerunOut(submission_ids=[submission_id], run_ids=run_ids)


@router.post("/submissions/{submission_id}/select", response_model=SubmissionOut)
def select_submission(submission_id: int, user: CurrentUser, session: WriteSessionDep,
                      now: NowDep, settings: SettingsDep,
                      body: SelectRequest | None = None) -> SubmissionOut:
    """Choose the finished submission that represents you in its phase (and is carried into
    the final); `{"selected": false}` goes back to the phase rule."""
    selected = True if body is None else body.selected
    submission = actions.select(session, submission_id, user, selected, now)
    return submission_out(session, submission, settings, user)


@router.post("/submissions/{submission_id}/baseline", response_model=SubmissionOut)
def baseline(submission_id: int, user: Organizer, session: WriteSessionDep, now: NowDep,
             settings: SettingsDep, body: BaselineRequest | None = None) -> SubmissionOut:
    """Flag (or unflag) a submission as a baseline: marked on the board, always carried."""
    flag = True if body is None else body.baseline
    submission = actions.flag_baseline(session, submission_id, user, flag, now)
    return submission_out(session, submission, settings, user)


@router.post("/submissions/{submission_id}/disqualify", response_model=SubmissionOut)
def disqualify(submission_id: int, user: Organizer, session: WriteSessionDep, now: NowDep,
               settings: SettingsDep, body: DisqualifyRequest | None = None) -> SubmissionOut:
    """Disqualify a submission with a reason shown to its owner (`{"disqualified": false}`
    reinstates). It follows the carry family: the origin and every copy carried into a final
    are disqualified together, their waiting runs cancelled and running ones stopped, and they
    leave every board (services/disqualify.py)."""
    body = body or DisqualifyRequest()
    submission = actions.disqualify(session, submission_id, user, body.disqualified,
                                    body.reason, now)
    return submission_out(session, submission, settings, user)


@router.get("/submissions/{submission_id}/download", response_class=FileResponse)
def download(submission_id: int, user: CurrentUser, session: SessionDep, now: NowDep,
             storage: Annotated[Storage, Depends(get_storage)]) -> FileResponse:
    """The stored zip, for its owner or an organizer of its competition (audited)."""
    submission = actions.audit_download(session, submission_id, user, now)
    return FileResponse(storage.absolute(submission.storage_path), media_type="application/zip",
                        filename=f"submission-{submission.id}.zip")
