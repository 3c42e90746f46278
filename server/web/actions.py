"""Buttons that change a submission: cancel (owner or organizer), select (owner), re-run,
baseline flag and disqualification (organizers). Each is a plain form POST carrying the
session's CSRF token and calls `server.services.submission_actions` (the unit of work the JSON
API uses too, so both answer alike); the browser is then sent back to a fixed page (never to a
URL taken from the request).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from server.api.deps import SESSION_COOKIE, NowDep, SettingsDep, get_db, get_queue
from server.core.config import Settings
from server.core.db import Database
from server.core.errors import AuthRequiredError
from server.models import TERMINAL_STATES, Submission, User
from server.services import submission_actions as actions
from server.services import users as user_service
from server.services.queue import JobQueue
from server.services.tenancy import is_staff
from server.web.rendering import PageRoute, check_csrf

router = APIRouter(include_in_schema=False, route_class=PageRoute)
BACK = {"dashboard": "/organizer?done={action}", "submission": "/submissions/{id}"}


@dataclass(frozen=True)
class Action:
    name: str
    label: str
    danger: bool = False
    confirm: str = ""  # asked before the form is sent (arena.js), for what cannot be undone

    def url(self, submission_id: int) -> str:
        return f"/submissions/{submission_id}/{self.name}"


def submission_actions(submission: Submission, user: User,
                       team_member: bool = False) -> list[Action]:
    """The buttons `user` gets for `submission`, given its state (the service re-checks);
    `team_member`: `user` is a current member of the submission's team (they select too)."""
    actions = []
    over = submission.state in TERMINAL_STATES
    if ((submission.user_id == user.id or team_member) and submission.state == "finished"
            and submission.disqualified_at is None):
        actions.append(Action("select", "Unselect" if submission.is_selected
                              else "Use for the leaderboard"))
    if not over and (is_staff(user) or submission.user_id == user.id):
        actions.append(Action("cancel", "Cancel", danger=True,
                              confirm=f"Cancel submission #{submission.id}? Its waiting runs "
                                      "are dropped and running ones stopped."))
    if is_staff(user):
        if over:
            actions.append(Action("rerun", "Re-run"))
        if submission.is_baseline or submission.state == "finished":  # a baseline has a score
            actions.append(Action("baseline", "Unmark baseline" if submission.is_baseline
                                  else "Mark as baseline"))
        if submission.disqualified_at is not None:
            actions.append(Action("disqualify", "Reinstate", confirm=(
                f"Reinstate submission #{submission.id} and its carried copies? They return "
                "to their boards; a copy whose runs were cancelled needs a re-run.")))
        else:
            actions.append(Action("disqualify", "Disqualify", danger=True, confirm=(
                f"Disqualify submission #{submission.id}? It and every copy carried from it "
                "leave every leaderboard and final, their waiting runs are cancelled; its "
                "owner sees the reason. You can reinstate it.")))
    return actions


async def _form_user(request: Request, db: Database, settings: Settings,
                     now: datetime) -> tuple[User, dict[str, Any]]:
    form = await request.form()
    check_csrf(request, settings, form.get("csrf_token"))
    with db.session() as session:
        user = user_service.user_for_token(session, request.cookies.get(SESSION_COOKIE, ""),
                                           now)
    if user is None:
        raise AuthRequiredError("log in again to change a submission")
    return user, dict(form)


def _back(form: dict[str, Any], submission_id: int, action: str) -> RedirectResponse:
    target = BACK.get(str(form.get("back")), BACK["submission"])
    target = target.format(id=submission_id, action=action)
    return RedirectResponse(target, status_code=303)


@router.post("/submissions/{submission_id}/cancel")
async def cancel(submission_id: int, request: Request, settings: SettingsDep, now: NowDep,
                 db: Annotated[Database, Depends(get_db)]) -> Response:
    user, form = await _form_user(request, db, settings, now)
    with db.session(write=True) as session:
        actions.cancel(session, submission_id, user, now)
    return _back(form, submission_id, "cancel")


@router.post("/submissions/{submission_id}/select")
async def select(submission_id: int, request: Request, settings: SettingsDep, now: NowDep,
                 db: Annotated[Database, Depends(get_db)]) -> Response:
    user, form = await _form_user(request, db, settings, now)
    with db.session(write=True) as session:
        actions.select(session, submission_id, user, None, now)
    return _back(form, submission_id, "select")


@router.post("/submissions/{submission_id}/rerun")
async def rerun(submission_id: int, request: Request, settings: SettingsDep, now: NowDep,
                db: Annotated[Database, Depends(get_db)],
                queue: Annotated[JobQueue, Depends(get_queue)]) -> Response:
    user, form = await _form_user(request, db, settings, now)
    with db.session(write=True) as session:
        actions.rerun(session, submission_id, user, now, settings.default_queue, queue,
                      str(form.get("reason", "")))
    return _back(form, submission_id, "rerun")


@router.post("/submissions/{submission_id}/baseline")
async def baseline(submission_id: int, request: Request, settings: SettingsDep, now: NowDep,
                   db: Annotated[Database, Depends(get_db)]) -> Response:
    user, form = await _form_user(request, db, settings, now)
    with db.session(write=True) as session:
        actions.flag_baseline(session, submission_id, user, None, now)
    return _back(form, submission_id, "baseline")


@router.post("/submissions/{submission_id}/disqualify")
async def disqualify(submission_id: int, request: Request, settings: SettingsDep, now: NowDep,
                     db: Annotated[Database, Depends(get_db)]) -> Response:
    """Disqualify (with the form's required `reason`) or reinstate a submission and its carried
    copies; organizers only."""
    user, form = await _form_user(request, db, settings, now)
    with db.session(write=True) as session:
        actions.disqualify(session, submission_id, user, None, str(form.get("reason", "")), now)
    return _back(form, submission_id, "disqualify")
