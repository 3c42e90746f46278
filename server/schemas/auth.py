"""Wire shapes for users and tokens."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["participant", "organizer", "admin"]


class UserCreate(BaseModel):
    username: str = Field(min_length=2, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    role: Role = "participant"
    password: str | None = Field(default=None, min_length=8, max_length=256)
    email: str | None = Field(default=None, max_length=255)
    issue_token: bool = True


class UserOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    username: str
    role: Role
    email: str | None
    created_at: datetime


class AccountOut(UserOut):
    """An account as its managers see it: active or revoked, and how many tokens it holds."""

    is_active: bool
    tokens: int = 0


class UserCreated(UserOut):
    token: str | None = Field(default=None, description="API token, shown once")


class TokenRequest(BaseModel):
    username: str
    password: str


class TokenOut(BaseModel):
    token: str
    token_type: Literal["bearer"] = "bearer"
    user: UserOut
