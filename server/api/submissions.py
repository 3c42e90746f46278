"""Submissions: upload, status, logs, results, and the caller's own list.

Participants only ever see their own submissions: another's id answers 404, exactly like an id
that does not exist. Logs are hidden from the owner when the phase hides them (organizers
still see them); in a phase whose test data is not public, the owner reads no meta-test output
or exception text, and withheld scores and per-task results are not served either
(services/secrecy.py decides; this module only applies it). An upload holds no database
connection while its body streams (a slow client would otherwise hold one for minutes): it
authenticates and checks the phase in short sessions before, and registers in one after.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response
from sqlalchemy import select
from starlette.concurrency import run_in_threadpool

from server.api.deps import (
    BriefUser,
    CurrentUser,
    NowDep,
    SessionDep,
    SettingsDep,
    get_db,
    get_queue,
)
from server.api.deps import get_storage as _storage
from server.api.paging import MAX_LIMIT, MAX_OFFSET, Page, paged
from server.core.db import Database
from server.core.errors import ForbiddenError
from server.models import Phase, Submission
from server.schemas.submission import (
    RunLog,
    RunResultOut,
    SubmissionLogs,
    SubmissionOut,
    SubmissionResults,
)
from server.services.queue import JobQueue
from server.services.secrecy import FULL, redact_run, served_log, view_for
from server.services.storage import Storage
from server.services.submission_view import submission_out
from server.services.submissions import get_visible_submission
from server.services.tenancy import organizes_phase, visible_phase
from server.services.upload_flow import receive_submission

router = APIRouter(prefix="/api/v1", tags=["submissions"])
_ZIP_BODY = {"requestBody": {"content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["file"],
    "properties": {"file": {"type": "string", "format": "binary"},
                   "note": {"type": "string"}, "league": {"type": "string"},
                   "method": {"type": "string"}, "description": {"type": "string"},
                   "code_url": {"type": "string"}}}}}}}


@router.post("/phases/{phase_id}/submissions", response_model=SubmissionOut, status_code=201,
             openapi_extra=_ZIP_BODY)
async def create_submission(phase_id: int, request: Request, user: BriefUser,
                            settings: SettingsDep, now: NowDep,
                            db: Annotated[Database, Depends(get_db)],
                            storage: Annotated[Storage, Depends(_storage)],
                            queue: Annotated[JobQueue, Depends(get_queue)]) -> SubmissionOut:
    """Upload a submission zip (multipart field 'file', optional 'note' and 'league')."""

    def check_phase() -> None:
        with db.session() as session:
            visible_phase(session, phase_id, user)

    def view(submission_id: int) -> SubmissionOut:
        with db.session() as session:
            return submission_out(session, session.get_one(Submission, submission_id), settings,
                                  user)

    await run_in_threadpool(check_phase)
    submission = await receive_submission(request, user_id=user.id, phase_id=phase_id,
                                          settings=settings, db=db, storage=storage,
                                          queue=queue, now=now)
    return await run_in_threadpool(view, submission.id)


@router.get("/submissions/{submission_id}", response_model=SubmissionOut)
def get_submission(submission_id: int, user: CurrentUser, session: SessionDep,
                   settings: SettingsDep) -> SubmissionOut:
    """State, reason, message, score, runs and queue position."""
    return submission_out(session, get_visible_submission(session, submission_id, user),
                          settings, user)


@router.get("/submissions/{submission_id}/logs", response_model=SubmissionLogs)
def get_logs(submission_id: int, user: CurrentUser, session: SessionDep) -> SubmissionLogs:
    submission = get_visible_submission(session, submission_id, user)
    phase = session.get_one(Phase, submission.phase_id)
    if phase.hide_logs and not organizes_phase(session, user, phase):
        raise ForbiddenError(f"logs are hidden in phase {phase.id} by its organizers; your "
                             "submission's state and reason are still shown",
                             code="logs.hidden")
    view = view_for(session, phase, user)
    return SubmissionLogs(submission_id=submission.id, runs=[
        RunLog(run_id=r.id, index=r.index, state=r.state, log=served_log(r, view))
        for r in submission.runs])


@router.get("/submissions/{submission_id}/results", response_model=SubmissionResults)
def get_results(submission_id: int, user: CurrentUser,
                session: SessionDep) -> SubmissionResults:
    """Per-run summary and per-task results (withheld from the owner while the phase hides
    scores or, with secret test data, until the organizers publish them)."""
    submission = get_visible_submission(session, submission_id, user)
    view = view_for(session, session.get_one(Phase, submission.phase_id), user)
    runs = [RunResultOut.model_validate(r) for r in submission.runs]
    if view is not FULL:
        runs = [RunResultOut(**redact_run(r.model_dump(), view)) for r in runs]
    return SubmissionResults(submission_id=submission.id, state=submission.state,
                             score=submission.score if view.scores else None, runs=runs)


@router.get("/me/submissions", response_model=list[SubmissionOut])
def my_submissions(request: Request, response: Response, user: CurrentUser,
                   session: SessionDep, settings: SettingsDep, phase_id: int | None = None,
                   limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 500,
                   offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0
                   ) -> list[SubmissionOut]:
    """Your submissions, newest first, `limit` at a time (`Link` names the next page; the
    500 newest were all one could see before)."""
    page = Page(limit=limit, offset=offset)
    query = select(Submission).where(Submission.user_id == user.id)
    if phase_id is not None:
        query = query.where(Submission.phase_id == phase_id)
    rows = session.execute(page.select(query.order_by(Submission.id.desc()))).scalars().all()
    return [submission_out(session, s, settings, user)
            for s in paged(request, response, page, rows, fetched=True)]
