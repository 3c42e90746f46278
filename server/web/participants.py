"""The organizer dashboard's approve/deny buttons for participation requests: plain form POSTs
with the session's CSRF token, calling the same service as the JSON API
(services/participation.py), then back to the dashboard (a fixed URL)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from server.api.deps import SESSION_COOKIE, NowDep, SettingsDep, get_db
from server.core.config import Settings
from server.core.db import Database
from server.core.errors import AuthRequiredError, ForbiddenError
from server.services import participation as service
from server.services import users as user_service
from server.services.competitions import get_owned_competition
from server.services.tenancy import is_staff
from server.web.rendering import PageRoute, check_csrf

router = APIRouter(include_in_schema=False, route_class=PageRoute)


async def _decide(request: Request, competition_id: int, user_id: int, approve: bool,
                  settings: Settings, now: datetime, db: Database) -> RedirectResponse:
    check_csrf(request, settings, (await request.form()).get("csrf_token"))
    with db.session(write=True) as session:
        user = user_service.user_for_token(session, request.cookies.get(SESSION_COOKIE, ""),
                                           now)
        if user is None:
            raise AuthRequiredError("log in again to decide on a participation request")
        if not is_staff(user):
            raise ForbiddenError("only the competition's organizers decide who takes part")
        comp = get_owned_competition(session, competition_id, user)
        service.decide(session, comp, user_id, approve, user, now)
    return RedirectResponse("/organizer?done=participation", status_code=303)


@router.post("/organizer/competitions/{competition_id}/participants/{user_id}/approve")
async def approve(competition_id: int, user_id: int, request: Request, settings: SettingsDep,
                  now: NowDep, db: Annotated[Database, Depends(get_db)]) -> Response:
    return await _decide(request, competition_id, user_id, True, settings, now, db)


@router.post("/organizer/competitions/{competition_id}/participants/{user_id}/deny")
async def deny(competition_id: int, user_id: int, request: Request, settings: SettingsDep,
               now: NowDep, db: Annotated[Database, Depends(get_db)]) -> Response:
    return await _decide(request, competition_id, user_id, False, settings, now, db)
