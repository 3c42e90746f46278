"""Teams over the API (issue 23): list a competition's teams, read your own (with its invite
code), create, join by code, leave, and (captain) remove a member. The rules and the audit
live in services/teams.py; each service call commits its own change."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.api.competitions import find_competition
from server.api.deps import CurrentUser, NowDep, SessionDep, WriteSessionDep
from server.api.paging import PageDep, paged
from server.core.errors import NotFoundError
from server.models import Team, TeamMember
from server.schemas.team import MyTeamOut, TeamIn, TeamJoinIn, TeamMemberOut, TeamOut
from server.services import teams as service

router = APIRouter(prefix="/api/v1", tags=["teams"])







def _mine(session: Session, team: Team) -> MyTeamOut:
    rows = service.members(session, team)
    return MyTeamOut(id=team.id, name=team.name, size=len(rows), invite_code=team.invite_code,
                     members=[TeamMemberOut(**m) for m in rows])


@router.get("/competitions/{competition_id}/teams", response_model=list[TeamOut])
def list_teams(request: Request, response: Response, competition_id: int, user: CurrentUser,
               session: SessionDep, page: PageDep) -> list[TeamOut]:
    """The competition's teams and their sizes (never their invite codes; dissolved teams
    left out), `limit` at a time (`Link` names the next page)."""
    comp = find_competition(session, str(competition_id), user)
    rows = session.execute(page.select(
        select(Team, func.count(TeamMember.id)).outerjoin(TeamMember,
                                                          TeamMember.team_id == Team.id)
        .where(Team.competition_id == comp.id, Team.dissolved_at.is_(None))
        .group_by(Team.id).order_by(Team.name, Team.id)
    )).all()
    return [TeamOut(id=t.id, name=t.name, size=n)
            for t, n in paged(request, response, page, rows, fetched=True)]


@router.get("/competitions/{competition_id}/team", response_model=MyTeamOut)
def my_team(competition_id: int, user: CurrentUser, session: SessionDep) -> MyTeamOut:
    """Your team in the competition, with its members and invite code (404: you have none)."""
    comp = find_competition(session, str(competition_id), user)
    team = service.team_of(session, comp, user)
    if team is None:
        raise NotFoundError(f"you are in no team of competition {comp.slug!r}; create one or "
                            "join one with its invite code", code="team.none")
    return _mine(session, team)


@router.post("/competitions/{competition_id}/teams", response_model=MyTeamOut,
             status_code=201)
def create_team(competition_id: int, body: TeamIn, user: CurrentUser,
                session: WriteSessionDep, now: NowDep) -> MyTeamOut:
    """Create a team; you are its captain."""
    comp = find_competition(session, str(competition_id), user)
    return _mine(session, service.create_team(session, comp, user, body.name, now))


@router.post("/competitions/{competition_id}/teams/join", response_model=MyTeamOut)
def join_team(competition_id: int, body: TeamJoinIn, user: CurrentUser, session: WriteSessionDep,
              now: NowDep) -> MyTeamOut:
    """Join the team whose invite code this is."""
    comp = find_competition(session, str(competition_id), user)
    return _mine(session, service.join_team(session, comp, user, body.code, now))


@router.post("/competitions/{competition_id}/team/leave", status_code=204)
def leave_team(competition_id: int, user: CurrentUser, session: WriteSessionDep,
               now: NowDep) -> None:
    """Leave your team (its submissions stay the team's)."""
    comp = find_competition(session, str(competition_id), user)
    service.leave_team(session, comp, user, now)


@router.delete("/teams/{team_id}/members/{member_id}", status_code=204)
def remove_member(team_id: int, member_id: int, user: CurrentUser, session: WriteSessionDep,
                  now: NowDep) -> None:
    """Remove a member from your team (its captain only)."""
    team = session.get(Team, team_id)
    if team is None:
        raise NotFoundError(f"no team with id {team_id}")
    comp = find_competition(session, str(team.competition_id), user)
    service.remove_member(session, comp, user, team_id, member_id, now)
