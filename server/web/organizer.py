"""The organizer dashboard: the queue with positions, the workers holding runs, recent
submissions, phase controls and export links — for the phases of competitions the organizer
owns (admins: all).

Every action is a plain form POST with the session's CSRF token, and calls the same service
the JSON API calls; an action whose service does not exist is not offered.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse
from sqlalchemy import select

from server.api.deps import SESSION_COOKIE, NowDep, OptionalUser, SessionDep, SettingsDep, get_db
from server.core.db import Database
from server.core.errors import AuthRequiredError, ForbiddenError, InvalidInputError, NotFoundError
from server.models import Competition, Phase, Submission, User
from server.services import competitions as competition_service
from server.services import users as user_service
from server.services.queue_view import queue_entries
from server.services.workers import list_workers
from server.web.actions import submission_actions
from server.web.rendering import PageRoute, check_csrf, login_redirect, render
from server.web.views import is_staff

router = APIRouter(include_in_schema=False, route_class=PageRoute)
PHASE_STATUS_ACTIONS = {"open": "Open", "closed": "Close"}
# Fixed texts only: a notice is never taken from the URL, so a link cannot put words here.
NOTICES = {"phase-status": "The phase status was changed.",
           "rerun": "The submission was queued again (its earlier runs are kept as history).",
           "cancel": "The submission's waiting runs were cancelled; running ones stop soon.",
           "baseline": "The baseline mark was changed."}


def organized_phases(session, user: User) -> list[Phase]:
    query = select(Phase).join(Competition).order_by(Phase.id)
    if user.role != "admin":
        query = query.where(Competition.owner_id == user.id)
    return list(session.execute(query).scalars())


def _require_staff(user: User | None) -> User:
    if user is None:
        raise AuthRequiredError("log in to use the organizer dashboard")
    if not is_staff(user):
        raise ForbiddenError("the organizer dashboard is for organizers; you are "
                             f"{user.role!r} — ask an admin if you should be one")
    return user


def phase_exports(phases: list[Phase]) -> dict[int, list[dict]]:
    """Export links per phase beyond the leaderboard JSON, where the backend offers them."""
    return {}


@router.get("/organizer")
def dashboard(request: Request, user: OptionalUser, session: SessionDep,
              settings: SettingsDep, now: NowDep):
    if user is None:
        return login_redirect()
    _require_staff(user)
    phases = organized_phases(session, user)
    ids = [p.id for p in phases]
    entries = [e for e in queue_entries(session, now, settings.default_queue)
               if e["phase_id"] in ids]
    queued: dict[str, list[dict]] = {}
    for entry in entries:
        if entry["state"] == "queued":
            queued.setdefault(entry["queue"], []).append(entry)
    recent = session.execute(
        select(Submission, User.username, Phase.name).join(User, User.id == Submission.user_id)
        .join(Phase, Phase.id == Submission.phase_id).where(Submission.phase_id.in_(ids))
        .order_by(Submission.id.desc()).limit(50)).all()
    return render(request, "organizer.html", user, settings, phases=phases, queued=queued,
                  running=[e for e in entries if e["state"] != "queued"],
                  workers=list_workers(session, now, silent_after_s=2 * settings.lease_seconds),
                  recent=recent, status_actions=PHASE_STATUS_ACTIONS,
                  exports=phase_exports(phases),
                  actions=lambda s: submission_actions(s, user),
                  notice=NOTICES.get(request.query_params.get("done", "")))


@router.post("/organizer/phases/{phase_id}/status")
async def set_phase_status(phase_id: int, request: Request, settings: SettingsDep,
                           now: NowDep, db: Annotated[Database, Depends(get_db)]):
    """Open or close a phase (the PATCH /api/v1/phases/{id} service, with its checks)."""
    form = await request.form()
    check_csrf(request, settings, form.get("csrf_token"))
    status = str(form.get("status", ""))
    if status not in PHASE_STATUS_ACTIONS:
        raise InvalidInputError(f"status {status!r} is not one of {list(PHASE_STATUS_ACTIONS)}")
    with db.session(write=True) as session:
        user = _require_staff(user_service.user_for_token(
            session, request.cookies.get(SESSION_COOKIE, ""), now))
        phase = session.get(Phase, phase_id)
        if phase is None:
            raise NotFoundError(f"no phase with id {phase_id}")
        competition_service.get_owned_competition(session, phase.competition_id, user)
        competition_service.update_phase(session, phase, {"status": status}, user, now)
    return RedirectResponse("/organizer?done=phase-status", status_code=303)
