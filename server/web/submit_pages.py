"""The web form upload: the API's upload itself (services/upload_flow.py), with the form's CSRF
token checked before anything is registered (a forged upload is discarded unregistered)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from server.api.deps import (
    SESSION_COOKIE,
    NowDep,
    OptionalUser,
    SessionDep,
    SettingsDep,
    get_db,
    get_queue,
    get_storage,
)
from server.core.db import Database
from server.core.errors import ArenaError, CsrfError, describe_error
from server.models import Submission, User
from server.services import users as user_service
from server.services.queue import JobQueue
from server.services.storage import Storage
from server.services.tenancy import visible_phase
from server.services.upload_flow import receive_submission
from server.web.rendering import PageRoute, check_csrf, login_redirect, render
from server.web.views import phase_context
from submission_api.submission_zip import UnsafeZipError

router = APIRouter(include_in_schema=False, route_class=PageRoute)


@router.get("/phases/{phase_id}/submit")
def submit_page(phase_id: int, request: Request, user: OptionalUser, session: SessionDep,
                settings: SettingsDep, now: NowDep) -> Response:
    """The upload form, only while the phase takes uploads (else why not, and what is next)."""
    if user is None:
        return login_redirect(request)
    phase = visible_phase(session, phase_id, user)
    return render(request, "submit.html", user, settings, phase=phase,
                  earlier=earlier_zips(session, user.id, phase.id),
                  **phase_context(session, phase, user, now))


def earlier_zips(session: Session, user_id: int, phase_id: int) -> dict[str, int]:
    """sha256 -> submission id of the user's zips in this phase, so the form can say before the
    upload that a chosen zip is one already submitted (it would count again)."""
    rows = session.execute(select(Submission.sha256, Submission.id).where(
        Submission.user_id == user_id, Submission.phase_id == phase_id)
        .order_by(Submission.id.desc()).limit(200)).all()
    return {sha: sid for sha, sid in reversed(rows)}


@router.post("/phases/{phase_id}/submit")
async def submit(phase_id: int, request: Request, settings: SettingsDep, now: NowDep,
                 db: Annotated[Database, Depends(get_db)],
                 storage: Annotated[Storage, Depends(get_storage)],
                 queue: Annotated[JobQueue, Depends(get_queue)]) -> Response:
    """The web form upload: same checks as the API, plus CSRF before anything is registered."""
    user = _cookie_user(request, db, now)
    if user is None:
        return login_redirect(request)

    def check_form(fields: dict[str, str]) -> None:
        check_csrf(request, settings, fields.get("csrf_token"))

    try:
        submission = await receive_submission(request, user_id=user.id, phase_id=phase_id,
                                              settings=settings, db=db, storage=storage,
                                              queue=queue, now=now, check_fields=check_form)
    except (ArenaError, UnsafeZipError) as exc:
        if isinstance(exc, CsrfError):
            raise
        with db.session() as session:
            phase = visible_phase(session, phase_id, user)
            status, body = describe_error(exc)
            return render(request, "submit.html", user, settings, status=status, phase=phase,
                          error=f"{body['error']['message']} ({body['error']['code']})",
                          **phase_context(session, phase, user, now))
    return RedirectResponse(f"/submissions/{submission.id}", status_code=303)


def _cookie_user(request: Request, db: Database, now: datetime) -> User | None:
    """The session cookie's user, read in a short session: the upload then streams holding
    no database connection (core/multipart.py)."""
    cookie = request.cookies.get(SESSION_COOKIE)
    if not cookie:
        return None
    with db.session() as session:
        return user_service.user_for_token(session, cookie, now, kind="session")
