"""Participation: a competition open to all or by approval; requests and decisions.

Participants read their status and ask to take part; the competition's organizers (and
admins) set the mode, list requests and approve or deny (services/participation.py).
"""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Request, Response
from sqlalchemy.orm import Session

from server.api.competitions import find_competition
from server.api.deps import CurrentUser, NowDep, Organizer, SessionDep, WriteSessionDep
from server.api.paging import PageDep, paged
from server.models import User
from server.schemas.participation import (
    ModeIn,
    ParticipationJoinIn,
    ParticipationMemberOut,
    ParticipationOut,
)
from server.services import participation as service
from server.services.competitions import get_owned_competition

router = APIRouter(prefix="/api/v1/competitions", tags=["participation"])






@router.get("/{competition_id}/participation", response_model=ParticipationOut)
def my_participation(competition_id: int, user: CurrentUser,
                     session: SessionDep) -> ParticipationOut:
    """Whether the caller may submit: the competition's mode and the caller's status."""
    comp = find_competition(session, str(competition_id), user)
    return ParticipationOut.of(comp, service.status_of(session, comp, user), bool(comp.terms))


@router.post("/{competition_id}/participation", response_model=ParticipationOut)
def request_participation(competition_id: int, user: CurrentUser, session: WriteSessionDep,
                          now: NowDep, body: ParticipationJoinIn | None = None) -> ParticipationOut:
    """Ask to take part (answered at once in an open competition); a competition with terms
    needs `{"accept_terms": true}`."""
    comp = find_competition(session, str(competition_id), user)
    status = service.request_participation(session, comp, user, now,
                                           accept_terms=body is not None and body.accept_terms)
    return ParticipationOut.of(comp, status, bool(comp.terms))


@router.put("/{competition_id}/participation/mode", response_model=ParticipationOut)
def set_mode(competition_id: int, body: ModeIn, user: Organizer, session: WriteSessionDep,
             now: NowDep) -> ParticipationOut:
    """Open the competition to all, or require approval (organizers of it)."""
    comp = get_owned_competition(session, competition_id, user)
    service.set_mode(session, comp, body.mode, user, now)
    return ParticipationOut.of(comp, "approved", terms=False)


@router.get("/{competition_id}/participants", response_model=list[ParticipationMemberOut])
def participants(request: Request, response: Response, competition_id: int, user: Organizer,
                 session: SessionDep, page: PageDep) -> list[ParticipationMemberOut]:
    """Every request and decision, pending first (organizers of it), `limit` at a time
    (`Link` names the next page)."""
    comp = get_owned_competition(session, competition_id, user)
    return [ParticipationMemberOut(**m)
            for m in paged(request, response, page, service.list_members(session, comp))]


def _decide(competition_id: int, user_id: int, approve: bool, user: User, session: Session,
            now: datetime) -> ParticipationMemberOut:
    comp = get_owned_competition(session, competition_id, user)
    service.decide(session, comp, user_id, approve, user, now)
    return next(ParticipationMemberOut(**m) for m in service.list_members(session, comp)
                if m["user_id"] == user_id)


@router.post("/{competition_id}/participants/{user_id}/approve",
             response_model=ParticipationMemberOut)
def approve(competition_id: int, user_id: int, user: Organizer, session: WriteSessionDep,
            now: NowDep) -> ParticipationMemberOut:
    """Let a participant submit (organizers of it)."""
    return _decide(competition_id, user_id, True, user, session, now)


@router.post("/{competition_id}/participants/{user_id}/deny", response_model=ParticipationMemberOut)
def deny(competition_id: int, user_id: int, user: Organizer, session: WriteSessionDep,
         now: NowDep) -> ParticipationMemberOut:
    """Refuse a participant (organizers of it); their uploads are refused from now on."""
    return _decide(competition_id, user_id, False, user, session, now)
