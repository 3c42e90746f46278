"""The organizer dashboard: the queue with positions, the workers holding runs, recent
submissions, phase controls and export links — for the phases of competitions the organizer
owns (admins: all).

Every action is a plain form POST with the session's CSRF token, and calls the same service
the JSON API calls; an action whose service does not exist is not offered.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

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
)
from server.core.config import Settings
from server.core.db import Database
from server.core.errors import AuthRequiredError, ConflictError, ForbiddenError
from server.models import RUN_STATES, Phase, Submission, User
from server.services import competitions as competition_service
from server.services import phase_actions
from server.services import users as user_service
from server.services.close_summary import latest_close_summaries
from server.services.participation import pending_requests
from server.services.queue import JobQueue, enqueue_quietly
from server.services.queue_view import queue_entries
from server.services.secrecy import results_state, test_data_level
from server.services.tenancy import is_staff, organized_phase_ids
from server.services.timeline import effective_status, phase_step
from server.services.workers import (
    broker_workers,
    hide_host_details,
    list_workers,
    mask_foreign_runs,
)
from server.web import pool_pages
from server.web.actions import submission_actions
from server.web.rendering import PageRoute, check_csrf, login_redirect, render

router = APIRouter(include_in_schema=False, route_class=PageRoute)
router.include_router(pool_pages.router)  # the dashboard's Worker pools pages (issue 37)
# Fixed texts only: a notice is never taken from the URL, so a link cannot put words here.
NOTICES = {"phase-status": "The phase status was changed.",
           "phase-closed": "The phase was closed. Who was carried into its final, and who was "
                           "not and why, is listed under “Phase closes” (and in the audit "
                           "log); each participant sees their own line on their page.",
           "rerun": "The submission was queued again (its earlier runs are kept as history).",
           "cancel": "The submission's waiting runs were cancelled; running ones stop soon.",
           "baseline": "The baseline mark was changed.",
           "participation": "The participation request was decided.",
           "disqualify": "The submission's standing was changed (see the audit log).",
           "phase-reopened": "The phase was reopened: it takes submissions again.",
           "phase-opened-now": "The phase was opened now (its start date is now): it takes "
                               "submissions.",
           "published": "The phase's results were published: its board and every owner's "
                        "scores are shown (see the audit log).",
           "phase-reopened-ended": "The phase was reopened, but its end date has passed: it "
                                   "takes no upload until you move ends_at (arena competition "
                                   "update, or the phase's PATCH)."}


def organized_phases(session: Session, user: User) -> list[Phase]:
    return list(session.execute(select(Phase).where(Phase.id.in_(organized_phase_ids(user)))
                                .order_by(Phase.id)).scalars())


def _require_staff(user: User | None) -> User:
    if user is None:
        raise AuthRequiredError("log in to use the organizer dashboard")
    if not is_staff(user):
        raise ForbiddenError("the organizer dashboard is for organizers; you are "
                             f"{user.role!r} — ask an admin if you should be one")
    return user


def phase_exports(phases: list[Phase]) -> dict[int, list[dict[str, str]]]:
    """Export links per phase beyond the leaderboard JSON: the JSON API's CSV export, and for a
    phase with a fact sheet its answers with who has not answered (JSON, CSV)."""
    exports: dict[int, list[dict[str, str]]] = {}
    for p in phases:
        links = [{"label": "CSV", "url": f"/api/v1/phases/{p.id}/leaderboard?format=csv"}]
        if p.factsheet:
            answers = f"/api/v1/phases/{p.id}/factsheet/answers"
            links += [{"label": "Fact sheets JSON", "url": answers},
                      {"label": "Fact sheets CSV", "url": f"{answers}?format=csv"}]
        exports[p.id] = links
    return exports


@router.get("/organizer")
def dashboard(request: Request, user: OptionalUser, session: SessionDep,
              settings: SettingsDep, now: NowDep,
              queue: Annotated[JobQueue, Depends(get_queue)]) -> Response:
    if user is None:
        return login_redirect(request, "organizer")
    _require_staff(user)
    phases = organized_phases(session, user)
    ids = [p.id for p in phases]
    entries = [e for e in queue_entries(session, now, settings.default_queue)
               if e["phase_id"] in ids]
    queued: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        if entry["state"] == "queued":
            queued.setdefault(entry["queue"], []).append(entry)
    shown = recent_filter(request, ids)
    query = (select(Submission, User.username, Phase.name)
             .join(User, User.id == Submission.user_id)
             .join(Phase, Phase.id == Submission.phase_id)
             .where(Submission.phase_id.in_([shown["phase"]] if shown["phase"] else ids)))
    if shown["state"]:
        query = query.where(Submission.state == shown["state"])
    if shown["who"]:
        query = query.where(User.username.contains(shown["who"], autoescape=True))
    recent = session.execute(query.order_by(Submission.id.desc()).limit(50)).all()
    return render(request, "organizer.html", user, settings, phases=phases, queued=queued,
                  running=[e for e in entries if e["state"] != "queued"],
                  workers=(workers := _workers(session, user, now, settings)),
                  idle_workers=[] if any(not w["silent"] for w in workers)
                  else broker_workers(request.app.state.queue),
                  pending=pending_requests(session, sorted({p.competition_id for p in phases})),
                  recent=recent, shown=shown, states=RUN_STATES,
                  finals={p.carry_from_id for p in phases if p.carry_from_id},
                  exports=phase_exports(phases),
                  steps={p.id: phase_step(p, now) for p in phases},
                  closes=latest_close_summaries(session, ids),
                  broker_failure=getattr(queue, "broker_failure", None),
                  secrecy={p.id: {"test_data": test_data_level(p), "results": results_state(p)}
                           for p in phases},
                  actions=lambda s: submission_actions(s, user),
                  notice=NOTICES.get(request.query_params.get("done", "")))


def recent_filter(request: Request, phase_ids: list[int]) -> dict[str, Any]:
    """The recent-submissions filter from the query string, each value checked (a phase the
    organizer does not own, or an unknown state, is ignored rather than trusted)."""
    params = request.query_params
    phase = params.get("phase", "")
    state = params.get("state", "")
    return {"phase": int(phase) if phase.isdigit() and int(phase) in phase_ids else None,
            "state": state if state in RUN_STATES else "",
            "who": params.get("who", "").strip()[:64]}


def _workers(session: Session, user: User, now: datetime,
             settings: Settings) -> list[dict[str, Any]]:
    """Workers as this organizer may see them (api/admin.py: others' runs masked)."""
    rows = list_workers(session, now, silent_after_s=2 * settings.lease_seconds)
    return rows if user.role == "admin" else hide_host_details(mask_foreign_runs(session, user,
                                                                                  rows))


@router.post("/organizer/phases/{phase_id}/open")
async def open_phase(phase_id: int, request: Request, settings: SettingsDep, now: NowDep,
                     db: Annotated[Database, Depends(get_db)]) -> RedirectResponse:
    """Open a draft phase, open an upcoming one now (its `starts_at` becomes now), or reopen a
    closed one (the PATCH /api/v1/phases/{id} service and its dataset checks). Reopening
    carries nothing again: a phase's submissions are carried into its final once (`closed_at`
    stays); other dates are not changed here."""
    check_csrf(request, settings, (await request.form()).get("csrf_token"))
    with db.session(write=True) as session:
        user, phase = _organized_phase(request, session, now, phase_id)
        upcoming = effective_status(phase, now) == "upcoming"
        if phase.status == "open" and not upcoming:
            raise ConflictError(f"phase {phase.id} is already open", code="phase.already_open")
        reopened = phase.status == "closed"
        changes: dict[str, Any] = {"starts_at": now} if upcoming else {"status": "open"}
        competition_service.update_phase(session, phase, changes, user, now)
        ended = phase.ends_at is not None and phase.ends_at <= now
    done = "phase-reopened-ended" if reopened and ended else (
        "phase-reopened" if reopened else "phase-opened-now" if upcoming else "phase-status")
    return RedirectResponse(f"/organizer?done={done}", status_code=303)


@router.post("/organizer/phases/{phase_id}/close")
async def close(phase_id: int, request: Request, settings: SettingsDep, now: NowDep,
                db: Annotated[Database, Depends(get_db)],
                queue: Annotated[JobQueue, Depends(get_queue)]) -> RedirectResponse:
    """Close a phase and carry its entries into the final phases that follow it (the
    POST /api/v1/phases/{id}/close service); their runs are enqueued after the commit."""
    check_csrf(request, settings, (await request.form()).get("csrf_token"))
    with db.session(write=True) as session:
        user = _staff_user(request, session, now)
        _phase, _report, jobs = phase_actions.close_now(session, phase_id, user, now,
                                                        settings.default_queue)
    enqueue_quietly(queue, jobs)
    return RedirectResponse("/organizer?done=phase-closed#closes", status_code=303)


@router.post("/organizer/phases/{phase_id}/publish")
async def publish(phase_id: int, request: Request, settings: SettingsDep, now: NowDep,
                  db: Annotated[Database, Depends(get_db)]) -> RedirectResponse:
    """Publish a closed phase's results (the POST /api/v1/phases/{id}/publish service)."""
    check_csrf(request, settings, (await request.form()).get("csrf_token"))
    with db.session(write=True) as session:
        phase_actions.publish_now(session, phase_id, _staff_user(request, session, now), now)
    return RedirectResponse("/organizer?done=published", status_code=303)


def _staff_user(request: Request, session: Session, now: datetime) -> User:
    return _require_staff(user_service.user_for_token(
        session, request.cookies.get(SESSION_COOKIE, ""), now))


def _organized_phase(request: Request, session: Session, now: datetime,
                     phase_id: int) -> tuple[User, Phase]:
    user = _staff_user(request, session, now)
    return user, phase_actions.organized_phase(session, phase_id, user)
