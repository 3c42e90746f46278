"""The fact-sheet page of a phase (issue 23): its questions as a form, prefilled with the
participant's answers; saving calls services/factsheets.py (the service the API uses)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from server.api.deps import NowDep, OptionalUser, SettingsDep, get_db
from server.core.db import Database
from server.core.errors import ArenaError, AuthRequiredError, InvalidInputError
from server.services import factsheets as service
from server.services.tenancy import visible_phase
from server.web.rendering import PageRoute, check_csrf, login_redirect, render, web_message
from server.web.sessions import cookie_user

router = APIRouter(include_in_schema=False, route_class=PageRoute)


@router.get("/phases/{phase_id}/factsheet")
def factsheet_page(phase_id: int, request: Request, user: OptionalUser, settings: SettingsDep,
                   db: Annotated[Database, Depends(get_db)]) -> Response:
    if user is None:
        return login_redirect(request)
    with db.session() as session:
        phase = visible_phase(session, phase_id, user)
        return render(request, "factsheet.html", user, settings, phase=phase,
                      questions=service.questions(phase),
                      answers=service.my_answers(session, phase, user), saved=False)


@router.post("/phases/{phase_id}/factsheet")
async def save(phase_id: int, request: Request, settings: SettingsDep, now: NowDep,
               db: Annotated[Database, Depends(get_db)]) -> Response:
    form = await request.form()
    check_csrf(request, settings, form.get("csrf_token"))
    with db.session(write=True) as session:
        user = cookie_user(request, session, now)
        if user is None:
            raise AuthRequiredError("log in again to answer the fact sheet")
        phase = visible_phase(session, phase_id, user)
        answers = {q["key"]: str(form.get(f"q-{q['key']}", "")) for q in service.questions(phase)}
        try:
            answers = service.save_answers(session, phase, user, answers, now)
            error = None
        except InvalidInputError as exc:
            error = web_message(exc.message)
        except ArenaError:
            raise
        return render(request, "factsheet.html", user, settings, phase=phase,
                      questions=service.questions(phase), answers=answers, saved=error is None,
                      error=error, status=200 if error is None else 422)
