"""Server-rendered pages (Jinja2, no front-end build): competitions and phases, leaderboards,
the submit form, my submissions, a submission page with logs and detailed results, login by
API token, and (server/web/organizer.py) the organizer dashboard.

Login exchanges the API token for a separate session token kept in an HttpOnly, SameSite=Lax
cookie; every state-changing form carries a CSRF token (an HMAC of that session token, or for
the login form a double-submit cookie), checked before anything changes — a forged upload is
discarded before it is registered. Pages work without JavaScript; /static/arena.js only adds
sortable columns, live refresh and an upload progress bar.
"""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import FileResponse, RedirectResponse, Response
from sqlalchemy import or_, select
from starlette.concurrency import run_in_threadpool

from server.api import docs
from server.api.competitions import visible_phase
from server.api.deps import (
    SESSION_COOKIE,
    AddressDep,
    LoginLimitDep,
    NowDep,
    OptionalUser,
    SessionDep,
    SettingsDep,
    get_db,
    get_queue,
    get_storage,
)
from server.api.leaderboard import organizes
from server.api.submissions import submission_out, zip_limits
from server.api.uploads import receive_file
from server.core.db import Database
from server.core.errors import (
    ArenaError,
    BadCredentialsError,
    CsrfError,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    TooManyAttemptsError,
    describe_error,
)
from server.core.security import same_secret
from server.models import TERMINAL_STATES, Competition, Phase, Submission, Team, TeamMember, User
from server.services import users as user_service
from server.services.audit_view import rerun_reasons
from server.services.close_summary import participant_close_notes
from server.services.kits import kit_files, phase_file_name
from server.services.methods import check_method, store_method
from server.services.passwords import password_login
from server.services.queue import JobQueue
from server.services.scores import explain_phase_score
from server.services.secrecy import results_state, test_data_level, view_for
from server.services.storage import Storage
from server.services.submissions import get_visible_submission, in_team_of, queue_position
from server.services.upload import accept_submission
from server.web import actions, organizer
from server.web.actions import submission_actions
from server.web.entry import entry_of, standing, tab_of
from server.web.failure import SANDBOX_PACKAGES, explain_failure
from server.web.rendering import (
    LOGIN_REASONS,
    STATIC_DIR,
    PageRoute,
    check_csrf,
    login_redirect,
    render,
    safe_next,
    web_message,
)
from server.web.report import report_response
from server.web.run_usage import usage_rows
from server.web.sessions import open_session, with_session_cookie
from server.web.views import (
    PER_PAGE,
    boarded_submissions,
    is_staff,
    leaderboards,
    page_numbers,
    phase_context,
    phase_facts,
    served_run,
    submission_standing,
    visible_competitions,
)
from submission_api.imports import module_advice
from submission_api.submission_zip import UnsafeZipError

router = APIRouter(include_in_schema=False, route_class=PageRoute)
router.include_router(organizer.router)
router.include_router(actions.router)
LOGIN_COOKIE = "arena_login_csrf"
STATIC_FILES = {"arena.css": "text/css", "arena.js": "text/javascript"}


@router.get("/static/{name}")
def static_file(name: str) -> Response:
    """The site's stylesheet and script, and the API docs' packaged assets (server/api/docs.py)."""
    if name in docs.ASSETS:
        return FileResponse(docs.assets_dir() / name, media_type=docs.ASSETS[name],
                            headers={"Cache-Control": "public, max-age=86400"})
    if name not in STATIC_FILES:
        raise NotFoundError(f"no static file {name!r}")
    return FileResponse(STATIC_DIR / name, media_type=STATIC_FILES[name],
                        headers={"Cache-Control": "public, max-age=300"})


HOME_PAGE_SIZE = 50
"""Competitions per home page (issue 21: 20,000 phases made one 5.2 MB page)."""


@router.get("/")
def index(request: Request, user: OptionalUser, session: SessionDep, settings: SettingsDep,
          now: NowDep, page: Annotated[int, Query(ge=1, le=10**6)] = 1):
    """Visible competitions, `HOME_PAGE_SIZE` a page, with links to the next and previous."""
    shown = visible_competitions(session, user, now, limit=HOME_PAGE_SIZE + 1,
                                 offset=(page - 1) * HOME_PAGE_SIZE)
    return render(request, "index.html", user, settings, competitions=shown[:HOME_PAGE_SIZE],
                  page=page, next_page=page + 1 if len(shown) > HOME_PAGE_SIZE else None)


@router.get("/competitions/{competition_id}")
def competition_page(competition_id: int, request: Request, user: OptionalUser,
                     session: SessionDep, settings: SettingsDep, now: NowDep,
                     tab: str | None = None):
    return competition_view(request, session, settings, now, competition_id, user, tab=tab)


def competition_view(request: Request, session, settings, now, competition_id: int,
                     user: User | None, tab: str | None = None, cli_token: str | None = None,
                     status: int = 200) -> Response:
    """The competition page: one tab (Overview, Data, Evaluation, Terms), the Get-started
    box, the Join box or the viewer's standing, and the phases' timeline."""
    shown = visible_competitions(session, user, now, competition_id=competition_id)
    if not shown:
        raise NotFoundError(f"no competition with id {competition_id}")
    comp = shown[0]["competition"]
    return render(request, "competition.html", user, settings, status=status, competition=comp,
                  phases=shown[0]["phases"], steps=shown[0]["steps"],
                  timeline=shown[0]["steps"], step=None, pages=comp.pages or [],
                  tab=tab_of(tab, comp), tabs=comp.tabs or {}, cli_token=cli_token,
                  entry=entry_of(session, comp, user), may_submit=entry_of(
                      session, comp, user).may_submit,
                  standing=standing(session, comp, user, shown[0]["phases"]),
                  base_url=settings.public_url_for(str(request.base_url)),
                  kit=kit_files(request.app.state.storage, comp.id),
                  kit_phase=next((phase_file_name(s.phase.name) for s in shown[0]["steps"]
                                  if s.accepting), None))


@router.get("/phases/{phase_id}")
def phase_page(phase_id: int, request: Request, user: OptionalUser, session: SessionDep,
               settings: SettingsDep, now: NowDep):
    phase = visible_phase(session, phase_id, user)
    return render(request, "phase.html", user, settings, phase=phase,
                  competition=phase.competition, facts=phase_facts(phase, now),
                  **phase_context(session, phase, user, now))


@router.get("/login")
def login_page(request: Request, settings: SettingsDep, user: OptionalUser):
    return _login_form(request, settings, user=user)


def _login_form(request: Request, settings, status: int = 200, error: str | None = None,
                next_path: str | None = None, user: User | None = None):
    """The form, with the reason the visitor was sent here (a fixed text chosen by key) and
    the page to return to afterwards."""
    nonce = secrets.token_urlsafe(24)
    why = LOGIN_REASONS.get(request.query_params.get("why", ""))
    next_path = safe_next(next_path or request.query_params.get("next"))
    response = render(request, "login.html", user, settings, status=status, error=error,
                      login_csrf=nonce, why=why, next_path=next_path or "")
    response.set_cookie(LOGIN_COOKIE, nonce, max_age=3600, httponly=True, samesite="lax",
                        secure=settings.session_cookie_secure)
    return response


@router.post("/login")
async def login(request: Request, db: Annotated[Database, Depends(get_db)],
                settings: SettingsDep, now: NowDep, limit: LoginLimitDep, address: AddressDep):
    """Log in with username and password (rate-limited), or by pasting an API token; either
    way the browser gets a web session, not an API token (server/web/sessions.py)."""
    form = await request.form()
    if not same_secret(form.get("csrf_token"), request.cookies.get(LOGIN_COOKIE, "")):
        raise CsrfError("the login form's CSRF token is missing or wrong; reload the page "
                        "and retry")
    token, username = str(form.get("token", "")).strip(), str(form.get("username", "")).strip()
    next_path = str(form.get("next", ""))
    with db.session(write=True) as session:
        user: User | None
        if username:
            try:
                user = password_login(session, username, str(form.get("password", "")),
                                      address, now, limit)
            except (BadCredentialsError, TooManyAttemptsError) as exc:
                status, body = describe_error(exc)
                return _login_form(request, settings, status=status, next_path=next_path,
                                   error=web_message(body["error"]["message"]))
        else:
            user = user_service.user_for_token(session, token, now, kind="api") \
                if token else None
        if user is None:
            return _login_form(request, settings, status=401, next_path=next_path,
                               error="Unknown or expired token; check it (it is the long "
                                     "string from your profile page or your organizer, or "
                                     "the one `arena login` uses) and try again.")
        session_token = open_session(session, user, now)
        landing = "/organizer" if is_staff(user) else "/my"
    response = RedirectResponse(safe_next(next_path) or landing, status_code=303)
    response.delete_cookie(LOGIN_COOKIE)
    return with_session_cookie(response, session_token, settings)


@router.post("/logout")
async def logout(request: Request, db: Annotated[Database, Depends(get_db)],
                 settings: SettingsDep):
    check_csrf(request, settings, str((await request.form()).get("csrf_token", "")))
    with db.session(write=True) as session:
        user_service.revoke_token(session, request.cookies[SESSION_COOKIE])
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(SESSION_COOKIE)
    return response


@router.get("/phases/{phase_id}/leaderboard")
def leaderboard_page(phase_id: int, request: Request, user: OptionalUser, session: SessionDep,
                     settings: SettingsDep, page: Annotated[int, Query(ge=1)] = 1,
                     per_page: Annotated[int, Query(ge=1, le=1000)] = PER_PAGE):
    """One page of each board (top `per_page` rows), with the viewer's own row always shown."""
    phase = visible_phase(session, phase_id, user)
    sees_all = organizes(session, phase, user)
    boards = leaderboards(session, phase, sees_all, page=page, per_page=per_page,
                          user_id=user.id if user is not None else None)
    return render(request, "leaderboard.html", user, settings, phase=phase, staff=sees_all,
                  ranking=(phase.leaderboard or {}).get("ranking"), boards=boards,
                  scoring=explain_phase_score(phase.protocol, phase.runs_per_submission),
                  per_page=per_page, page_numbers=page_numbers)


@router.get("/phases/{phase_id}/submit")
def submit_page(phase_id: int, request: Request, user: OptionalUser, session: SessionDep,
                settings: SettingsDep, now: NowDep):
    """The upload form, only while the phase takes uploads (else why not, and what is next)."""
    if user is None:
        return login_redirect(request)
    phase = visible_phase(session, phase_id, user)
    return render(request, "submit.html", user, settings, phase=phase,
                  earlier=earlier_zips(session, user.id, phase.id),
                  **phase_context(session, phase, user, now))


def earlier_zips(session, user_id: int, phase_id: int) -> dict[str, int]:
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
                 queue: Annotated[JobQueue, Depends(get_queue)]):
    """The web form upload: same checks as the API, plus CSRF before anything is registered."""
    user = _cookie_user(request, db, now)
    if user is None:
        return login_redirect(request)
    try:
        staged, fields = await receive_file(request, storage, settings.max_upload_bytes,
                                            owner=user.id)
        try:
            check_csrf(request, settings, fields.get("csrf_token"))
            method = check_method(fields)
        except (CsrfError, InvalidInputError):
            staged.path.unlink(missing_ok=True)
            raise
        submission = await run_in_threadpool(
            accept_submission, db, storage, queue, user_id=user.id, phase_id=phase_id,
            staged=staged, now=now, limits=zip_limits(settings),
            default_queue=settings.default_queue, note=fields.get("note", ""),
            league=fields.get("league") or None)
        await run_in_threadpool(store_method, db, submission.id, method)
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


def _cookie_user(request: Request, db: Database, now):
    cookie = request.cookies.get(SESSION_COOKIE)
    if not cookie:
        return None
    with db.session() as session:
        return user_service.user_for_token(session, cookie, now, kind="session")


@router.get("/my")
def my_page(request: Request, user: OptionalUser, session: SessionDep, settings: SettingsDep,
            phase: int | None = None):
    if user is None:
        return login_redirect(request)
    teams = select(TeamMember.team_id).where(TeamMember.user_id == user.id)
    query = (select(Submission, Phase.name, Competition.title, Competition.id)
             .join(Phase, Phase.id == Submission.phase_id)
             .join(Competition, Competition.id == Phase.competition_id)
             .where(or_(Submission.user_id == user.id,  # and the current team's (32.2)
                        Submission.team_id.in_(teams))))
    if phase is not None:
        query = query.where(Submission.phase_id == phase)
    rows = session.execute(query.order_by(Submission.id.desc()).limit(200)).all()
    on_board = boarded_submissions(session, {s.phase_id for s, *_ in rows}, user)
    names = dict(session.execute(select(User.id, User.username).where(
        User.id.in_({s.user_id for s, *_ in rows} - {user.id}))).all())
    views = {pid: view_for(session, session.get_one(Phase, pid), user)
             for pid in {s.phase_id for s, *_ in rows}}
    items = [{"s": s, "phase_name": name, "competition": title, "competition_id": comp_id,
              "on_board": s.id in on_board,
              "by": None if s.user_id == user.id else names.get(s.user_id),
              "score": s.score if views[s.phase_id].scores else None,
              "position": None if s.state in TERMINAL_STATES
              else queue_position(session, s, settings.default_queue)}
             for s, name, title, comp_id in rows]
    active = any(s.state not in TERMINAL_STATES for s, *_ in rows)
    notes = participant_close_notes(session, user.id, {s.phase_id for s, *_ in rows})
    return render(request, "my.html", user, settings, submissions=items, active=active,
                  close_notes=notes)


@router.get("/submissions/{submission_id}")
def submission_page(submission_id: int, request: Request, user: OptionalUser,
                    session: SessionDep, settings: SettingsDep, now: NowDep):
    if user is None:
        return login_redirect(request)
    submission = get_visible_submission(session, submission_id, user)
    phase = session.get_one(Phase, submission.phase_id)
    sees_all = organizes(session, phase, user)
    hidden = not sees_all and phase.hide_logs
    mate = submission.user_id != user.id and in_team_of(session, submission, user)
    owner = submission_owner(session, submission) if sees_all or mate else None
    team = session.get(Team, submission.team_id) if submission.team_id is not None else None
    view = view_for(session, phase, user)
    current = [r for r in submission.runs if r.superseded_at is None]
    runs = [served_run(r, view) for r in current]
    standing = submission_standing(session, phase, submission, sees_all) if view.scores \
        else {"rank": None, "total": None, "on_board": False, "ci95": None, "run_index": None}
    return render(request, "submission.html", user, settings, phase=phase, owner=owner,
                  s=submission_out(session, submission, settings, user), runs=runs,
                  history=[served_run(r, view) for r in submission.runs if r not in current],
                  active=submission.state not in TERMINAL_STATES,
                  model=submission, team=team.name if team else None,
                  actions=submission_actions(submission, user, team_member=mate),
                  logs=None if hidden else runs, explain=explain_failure, view=view,
                  test_data=test_data_level(phase), results=results_state(phase),
                  sandbox_packages=SANDBOX_PACKAGES, now=now, competition=phase.competition,
                  module_advice=module_advice, standing=standing,
                  reruns=rerun_reasons(session, submission.id),
                  usage=usage_rows(current) if sees_all else [])


def submission_owner(session, submission: Submission) -> str:
    return session.get(User, submission.user_id).username


@router.get("/submissions/{submission_id}/runs/{run_index}/report")
def run_report(submission_id: int, run_index: int, request: Request, user: OptionalUser,
               session: SessionDep, download: bool = False):
    """The detailed results of one finished run, rendered by submission_api.report."""
    if user is None:
        return login_redirect(request)
    submission = get_visible_submission(session, submission_id, user)
    run = next((r for r in submission.runs if r.index == run_index), None)
    phase = session.get_one(Phase, submission.phase_id)
    if not view_for(session, phase, user).details:
        raise ForbiddenError(f"the detailed results of phase {phase.id} are withheld until its "
                             "organizers publish them; its page says when",
                             code="results.withheld")
    if run is None or run.state != "finished" or not run.summary:
        raise NotFoundError(f"submission {submission_id} has no finished run {run_index}; "
                            "detailed results exist once a run has finished")
    return report_response(submission, run, phase, download=download)

