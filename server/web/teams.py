"""Team pages (issue 23): the competition's Team page (your team with its members, invite link
and Leave; the captain's Remove buttons; else forms to create a team or join one by code) and
the invite link `/teams/join/{code}`. Plain form POSTs with the session's CSRF token, calling
services/teams.py (the service the JSON API uses).

An invite holds a newcomer all the way (issue 32.4): not logged in, the link leads to the login
page and its sign-up link and back; not yet in the competition, the invite page's one button
joins the competition (accepting its terms) and the team; where the organizers approve
participants, it asks to join and the page says to come back to the same link once approved."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from server.api.deps import NowDep, OptionalUser, SettingsDep, get_db
from server.core.config import Settings
from server.core.db import Database
from server.core.errors import AuthRequiredError, NotFoundError
from server.models import Competition, Team, User
from server.services import teams as service
from server.services.participation import request_participation, status_of
from server.web.rendering import PageRoute, check_csrf, login_redirect, render
from server.web.sessions import cookie_user

router = APIRouter(include_in_schema=False, route_class=PageRoute)


def _competition(session: Session, competition_id: int) -> Competition:
    comp: Competition | None = session.get(Competition, competition_id)
    if comp is None or not any(p.status != "draft" for p in comp.phases):
        raise NotFoundError(f"no competition with id {competition_id}")
    return comp


@router.get("/competitions/{competition_id}/team")
def team_page(competition_id: int, request: Request, user: OptionalUser, now: NowDep,
              settings: SettingsDep, db: Annotated[Database, Depends(get_db)]) -> Response:
    if user is None:
        return login_redirect(request)
    with db.session() as session:
        comp = _competition(session, competition_id)
        team = service.team_of(session, comp, user)
        members = service.members(session, team) if team else []
        try:
            service.check_changes_allowed(comp, now)
            frozen = None
        except Exception as exc:  # noqa: BLE001 - its message says why teams cannot change
            frozen = getattr(exc, "message", str(exc))
        return render(request, "team.html", user, settings, competition=comp, team=team,
                      members=members, frozen=frozen,
                      invite=f"{settings.public_url_for(str(request.base_url))}/teams/join/"
                             f"{team.invite_code}" if team else None)


async def _signed_in(request: Request, settings: Settings, session: Session,
                     now: datetime) -> User:
    check_csrf(request, settings, (await request.form()).get("csrf_token"))
    user = cookie_user(request, session, now)
    if user is None:
        raise AuthRequiredError("log in again to change your team")
    return user


@router.post("/competitions/{competition_id}/team/create")
async def create(competition_id: int, request: Request, settings: SettingsDep, now: NowDep,
                 db: Annotated[Database, Depends(get_db)]) -> Response:
    with db.session(write=True) as session:
        user = await _signed_in(request, settings, session, now)
        name = str((await request.form()).get("name", ""))
        service.create_team(session, _competition(session, competition_id), user, name, now)
    return RedirectResponse(f"/competitions/{competition_id}/team", status_code=303)


@router.post("/competitions/{competition_id}/team/leave")
async def leave(competition_id: int, request: Request, settings: SettingsDep, now: NowDep,
                db: Annotated[Database, Depends(get_db)]) -> Response:
    with db.session(write=True) as session:
        user = await _signed_in(request, settings, session, now)
        service.leave_team(session, _competition(session, competition_id), user, now)
    return RedirectResponse(f"/competitions/{competition_id}/team", status_code=303)


@router.post("/competitions/{competition_id}/team/members/{member_id}/remove")
async def remove(competition_id: int, member_id: int, request: Request, settings: SettingsDep,
                 now: NowDep, db: Annotated[Database, Depends(get_db)]) -> Response:
    with db.session(write=True) as session:
        captain = await _signed_in(request, settings, session, now)
        comp = _competition(session, competition_id)
        team = service.team_of(session, comp, captain)
        if team is None:
            raise NotFoundError("you are in no team of this competition", code="team.none")
        service.remove_member(session, comp, captain, team.id, member_id, now)
    return RedirectResponse(f"/competitions/{competition_id}/team", status_code=303)


def _team_by_code(session: Session, code: str) -> Team:
    team: Team | None = session.execute(
        select(Team).where(Team.invite_code == code)).scalar_one_or_none()
    if team is None or team.dissolved_at is not None:
        raise NotFoundError("this invite link is unknown: ask the team's captain for it again",
                            code="team.bad_code")
    return team


@router.get("/teams/join/{code}")
def invite_page(code: str, request: Request, user: OptionalUser, settings: SettingsDep,
                db: Annotated[Database, Depends(get_db)]) -> Response:
    if user is None:
        return login_redirect(request, why="invite")
    with db.session() as session:
        team = _team_by_code(session, code)
        comp = session.get_one(Competition, team.competition_id)
        mine = service.team_of(session, comp, user)
        return render(request, "team_invite.html", user, settings, team=team, competition=comp,
                      size=len(service.members(session, team)), code=code, mine=mine,
                      taking_part=status_of(session, comp, user))


@router.post("/teams/join/{code}")
async def join(code: str, request: Request, settings: SettingsDep, now: NowDep,
               db: Annotated[Database, Depends(get_db)]) -> Response:
    with db.session(write=True) as session:
        user = await _signed_in(request, settings, session, now)
        team = _team_by_code(session, code)
        comp = session.get_one(Competition, team.competition_id)
        service.check_participant_account(user)  # before it asks to take part for them
        if status_of(session, comp, user) == "none":  # a newcomer: the competition first
            accept = (await request.form()).get("accept_terms") == "yes"
            asked = request_participation(session, comp, user, now, accept_terms=accept)
            if asked != "approved":  # the invite page says to come back once approved
                return RedirectResponse(f"/teams/join/{code}", status_code=303)
        service.join_team(session, comp, user, code, now)
    return RedirectResponse(f"/competitions/{comp.id}/team", status_code=303)
