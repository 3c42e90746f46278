"""The competition page's forms: Join / Request access (accepting the terms when the competition
has them) and "Create a token for the command line" in the Get-started box (the token is
shown once, inside the exact `arena login --server … --token …` line). Plain form POSTs with
the session's CSRF token, calling the services the JSON API uses."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response
from sqlalchemy.orm import Session

from server.api.deps import NowDep, SettingsDep, get_db
from server.core.config import Settings
from server.core.db import Database
from server.core.errors import AuthRequiredError, ForbiddenError, NotFoundError
from server.models import Competition, User
from server.services import api_tokens
from server.services.participation import request_participation, status_of
from server.web.rendering import PageRoute, check_csrf
from server.web.sessions import cookie_user

router = APIRouter(include_in_schema=False, route_class=PageRoute)


async def _form(request: Request, settings: Settings) -> dict[str, Any]:
    form = await request.form()
    check_csrf(request, settings, form.get("csrf_token"))
    return dict(form)


def _user_and_competition(request: Request, session: Session, competition_id: int,
                          now: datetime) -> tuple[User, Competition]:
    user = cookie_user(request, session, now)
    if user is None:
        raise AuthRequiredError("log in (or sign up) to take part")
    comp = session.get(Competition, competition_id)
    if comp is None or not any(p.status != "draft" for p in comp.phases):
        raise NotFoundError(f"no competition with id {competition_id}")
    return user, comp


@router.post("/competitions/{competition_id}/join")
async def join(competition_id: int, request: Request, settings: SettingsDep, now: NowDep,
               db: Annotated[Database, Depends(get_db)]) -> Response:
    """Join (open) or ask to (approval); the terms checkbox must be ticked when there are
    terms (the service refuses otherwise, with what to do)."""
    form = await _form(request, settings)
    with db.session(write=True) as session:
        user, comp = _user_and_competition(request, session, competition_id, now)
        status = status_of(session, comp, user)
        if status != "none":  # the page offers the form only to those who may still join
            raise ForbiddenError(f"you cannot join {comp.title!r} again: your status there is "
                                 f"{status!r}", code="participation.already")
        request_participation(session, comp, user, now,
                              accept_terms=form.get("accept_terms") == "yes")
    return RedirectResponse(f"/competitions/{competition_id}?joined=1", status_code=303)


@router.post("/competitions/{competition_id}/cli-token")
async def cli_token(competition_id: int, request: Request, settings: SettingsDep,
                    now: NowDep, db: Annotated[Database, Depends(get_db)]) -> Response:
    """A named API token for `arena login`, shown once on the competition page."""
    from server.web.competition_pages import competition_view

    await _form(request, settings)
    with db.session(write=True) as session:
        user, comp = _user_and_competition(request, session, competition_id, now)
        _, plain = api_tokens.create_token(session, user, f"cli ({comp.slug})", now)
    with db.session() as session:
        return competition_view(request, session, settings, now, competition_id,
                                cookie_user(request, session, now), cli_token=plain,
                                status=201)
