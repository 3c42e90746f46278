"""The public pages of competitions: the home listing, a competition with its tabs, a phase,
and a phase's leaderboards. They read through the same services as the JSON API."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from server.api.deps import NowDep, OptionalUser, SessionDep, SettingsDep
from server.core.config import Settings
from server.core.errors import NotFoundError
from server.models import User
from server.services.kits import kit_files, phase_file_name
from server.services.scores import explain_phase_score
from server.services.tenancy import organizes_phase, visible_phase
from server.web.entry import entry_of, standing, tab_of
from server.web.rendering import PageRoute, render
from server.web.views import (
    PER_PAGE,
    leaderboards,
    page_numbers,
    phase_context,
    phase_facts,
    visible_competitions,
)

router = APIRouter(include_in_schema=False, route_class=PageRoute)

HOME_PAGE_SIZE = 50
"""Competitions per home page (issue 21: 20,000 phases made one 5.2 MB page)."""


@router.get("/")
def index(request: Request, user: OptionalUser, session: SessionDep, settings: SettingsDep,
          now: NowDep, page: Annotated[int, Query(ge=1, le=10**6)] = 1) -> Response:
    """Visible competitions, `HOME_PAGE_SIZE` a page, with links to the next and previous."""
    shown = visible_competitions(session, user, now, limit=HOME_PAGE_SIZE + 1,
                                 offset=(page - 1) * HOME_PAGE_SIZE)
    return render(request, "index.html", user, settings, competitions=shown[:HOME_PAGE_SIZE],
                  page=page, next_page=page + 1 if len(shown) > HOME_PAGE_SIZE else None)


@router.get("/competitions/{competition_id}")
def competition_page(competition_id: int, request: Request, user: OptionalUser,
                     session: SessionDep, settings: SettingsDep, now: NowDep,
                     tab: str | None = None) -> Response:
    return competition_view(request, session, settings, now, competition_id, user, tab=tab)


def competition_view(request: Request, session: Session, settings: Settings, now: datetime,
                     competition_id: int, user: User | None, tab: str | None = None,
                     cli_token: str | None = None, status: int = 200) -> Response:
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
               settings: SettingsDep, now: NowDep) -> Response:
    phase = visible_phase(session, phase_id, user)
    return render(request, "phase.html", user, settings, phase=phase,
                  competition=phase.competition, facts=phase_facts(phase, now),
                  **phase_context(session, phase, user, now))


@router.get("/phases/{phase_id}/leaderboard")
def leaderboard_page(phase_id: int, request: Request, user: OptionalUser, session: SessionDep,
                     settings: SettingsDep, page: Annotated[int, Query(ge=1)] = 1,
                     per_page: Annotated[int, Query(ge=1, le=1000)] = PER_PAGE) -> Response:
    """One page of each board (top `per_page` rows), with the viewer's own row always shown."""
    phase = visible_phase(session, phase_id, user)
    sees_all = organizes_phase(session, user, phase)
    boards = leaderboards(session, phase, sees_all, page=page, per_page=per_page,
                          user_id=user.id if user is not None else None)
    return render(request, "leaderboard.html", user, settings, phase=phase, staff=sees_all,
                  ranking=(phase.leaderboard or {}).get("ranking"), boards=boards,
                  scoring=explain_phase_score(phase.protocol, phase.runs_per_submission),
                  per_page=per_page, page_numbers=page_numbers)
