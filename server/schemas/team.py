"""Teams over the API: create, join by code, a team as listed and as its members read it
(server/api/teams.py)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class TeamIn(BaseModel):
    name: str = Field(min_length=1, max_length=64)


class TeamJoinIn(BaseModel):
    code: str = Field(min_length=1, max_length=64)


class TeamMemberOut(BaseModel):
    user_id: int
    username: str
    joined_at: datetime
    captain: bool


class TeamOut(BaseModel):
    id: int
    name: str
    size: int


class MyTeamOut(TeamOut):
    invite_code: str
    members: list[TeamMemberOut]
