"""Minimal server-rendered pages (Jinja2, no front-end build): leaderboard, submit form, my
submissions, a submission page, and login by API token.

Login exchanges the API token for a separate session token kept in an HttpOnly, SameSite=Lax
cookie; every page form carries a CSRF token that is an HMAC of that session token, checked
before any state changes (a forged upload is discarded before it is registered).
"""

from __future__ import annotations

import hmac
from datetime import timedelta
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from sqlalchemy import select
from starlette.concurrency import run_in_threadpool

from server.api.competitions import visible_phase
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
from server.api.submissions import submission_out, zip_limits
from server.api.uploads import receive_file
from server.core.db import Database
from server.core.errors import ArenaError, CsrfError, describe_error
from server.core.security import csrf_token
from server.models import Competition, Phase, Submission
from server.services import users as user_service
from server.services.leaderboard import compute_leaderboard
from server.services.queue import JobQueue
from server.services.storage import Storage
from server.services.submissions import get_visible_submission
from server.services.upload import accept_submission
from submission_api.submission_zip import UnsafeZipError

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=str(Path(__file__).resolve().parent.parent / "templates"))
SESSION_TTL = timedelta(days=7)


def _render(request: Request, name: str, user, settings, status: int = 200, **ctx) -> Response:
    cookie = request.cookies.get(SESSION_COOKIE)
    csrf = csrf_token(settings.secret_key, cookie) if cookie and user else ""
    return templates.TemplateResponse(request, name, {"user": user, "csrf": csrf, **ctx},
                                      status_code=status)


def _check_csrf(request: Request, settings, sent: str | None) -> None:
    cookie = request.cookies.get(SESSION_COOKIE)
    expected = csrf_token(settings.secret_key, cookie) if cookie else ""
    if not cookie or not sent or not hmac.compare_digest(sent, expected):
        raise CsrfError("the form's CSRF token is missing or wrong; reload the page and retry")


def _login_redirect() -> RedirectResponse:
    return RedirectResponse("/login", status_code=303)


@router.get("/", response_class=HTMLResponse)
def index(request: Request, user: OptionalUser, session: SessionDep, settings: SettingsDep):
    comps = list(session.execute(select(Competition).order_by(Competition.id)).scalars())
    staff = user is not None and user.role != "participant"
    shown = [(c, [p for p in c.phases if staff or p.status != "draft"]) for c in comps]
    competitions = [{"title": c.title, "description": c.description, "phases": ps}
                    for c, ps in shown if ps or staff]
    return _render(request, "index.html", user, settings, competitions=competitions)


@router.get("/login", response_class=HTMLResponse)
def login_page(request: Request, settings: SettingsDep):
    return _render(request, "login.html", None, settings)


@router.post("/login")
async def login(request: Request, db: Annotated[Database, Depends(get_db)],
                settings: SettingsDep, now: NowDep):
    token = str((await request.form()).get("token", "")).strip()
    with db.session(write=True) as session:
        user = user_service.user_for_token(session, token, now) if token else None
        if user is None:
            return _render(request, "login.html", None, settings, status=401,
                           error="Unknown or expired token; check it and try again.")
        session_token = user_service.issue_token(session, user, kind="session", ttl=SESSION_TTL,
                                                 name="web", now=now)
    response = RedirectResponse("/my", status_code=303)
    response.set_cookie(SESSION_COOKIE, session_token, max_age=int(SESSION_TTL.total_seconds()),
                        httponly=True, samesite="lax", secure=settings.session_cookie_secure)
    return response


@router.post("/logout")
async def logout(request: Request, db: Annotated[Database, Depends(get_db)],
                 settings: SettingsDep):
    _check_csrf(request, settings, str((await request.form()).get("csrf_token", "")))
    with db.session(write=True) as session:
        user_service.revoke_token(session, request.cookies[SESSION_COOKIE])
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(SESSION_COOKIE)
    return response


@router.get("/phases/{phase_id}/leaderboard", response_class=HTMLResponse)
def leaderboard_page(phase_id: int, request: Request, user: OptionalUser, session: SessionDep,
                     settings: SettingsDep):
    phase = visible_phase(session, phase_id, user)
    return _render(request, "leaderboard.html", user, settings, phase=phase,
                   entries=compute_leaderboard(session, phase))


@router.get("/phases/{phase_id}/submit", response_class=HTMLResponse)
def submit_page(phase_id: int, request: Request, user: OptionalUser, session: SessionDep,
                settings: SettingsDep):
    if user is None:
        return _login_redirect()
    phase = visible_phase(session, phase_id, user)
    return _render(request, "submit.html", user, settings, phase=phase)


@router.post("/phases/{phase_id}/submit")
async def submit(phase_id: int, request: Request, settings: SettingsDep, now: NowDep,
                 db: Annotated[Database, Depends(get_db)],
                 storage: Annotated[Storage, Depends(get_storage)],
                 queue: Annotated[JobQueue, Depends(get_queue)]):
    """The web form upload: same checks as the API, plus CSRF before anything is registered."""
    user = _cookie_user(request, db, now)
    if user is None:
        return _login_redirect()
    try:
        staged, fields = await receive_file(request, storage, settings.max_upload_bytes)
        try:
            _check_csrf(request, settings, fields.get("csrf_token"))
        except CsrfError:
            staged.path.unlink(missing_ok=True)
            raise
        submission = await run_in_threadpool(
            accept_submission, db, storage, queue, user_id=user.id, phase_id=phase_id,
            staged=staged, now=now, limits=zip_limits(settings),
            default_queue=settings.default_queue, note=fields.get("note", ""))
    except (ArenaError, UnsafeZipError) as exc:
        with db.session() as session:
            phase = session.get(Phase, phase_id)
        status, body = describe_error(exc)
        return _render(request, "submit.html", user, settings, status=status, phase=phase,
                       error=f"{body['error']['message']} ({body['error']['code']})")
    return RedirectResponse(f"/submissions/{submission.id}", status_code=303)


def _cookie_user(request: Request, db: Database, now):
    cookie = request.cookies.get(SESSION_COOKIE)
    if not cookie:
        return None
    with db.session() as session:
        return user_service.user_for_token(session, cookie, now)


@router.get("/my", response_class=HTMLResponse)
def my_page(request: Request, user: OptionalUser, session: SessionDep, settings: SettingsDep):
    if user is None:
        return _login_redirect()
    rows = session.execute(select(Submission).where(Submission.user_id == user.id)
                           .order_by(Submission.id.desc()).limit(200)).scalars()
    return _render(request, "my.html", user, settings, submissions=list(rows))


@router.get("/submissions/{submission_id}", response_class=HTMLResponse)
def submission_page(submission_id: int, request: Request, user: OptionalUser,
                    session: SessionDep, settings: SettingsDep):
    if user is None:
        return _login_redirect()
    submission = get_visible_submission(session, submission_id, user)
    phase = session.get(Phase, submission.phase_id)
    hidden = user.role == "participant" and phase.hide_logs
    return _render(request, "submission.html", user, settings,
                   s=submission_out(session, submission, settings),
                   logs=None if hidden else submission.runs)
