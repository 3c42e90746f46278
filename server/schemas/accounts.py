"""Wire shapes of accounts people make themselves: sign-up, own API tokens, reset links."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from server.schemas.auth import UserOut


class SignupIn(BaseModel):
    username: str = Field(min_length=1, max_length=64)
    email: str = Field(min_length=3, max_length=255)
    password: str = Field(min_length=1, max_length=256)
    invite_code: str = Field(default="", max_length=256)


class SignupOut(BaseModel):
    user: UserOut
    token: str = Field(description="an API token named 'signup', shown once")


class PasswordChangeIn(BaseModel):
    current_password: str = Field(min_length=1, max_length=256)
    new_password: str = Field(min_length=1, max_length=256)
    keep_api_tokens: bool = False  # else every API token ends, this request's too


class TokenIn(BaseModel):
    name: str = Field(min_length=1, max_length=128)


class ApiTokenOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    name: str | None
    created_at: datetime
    expires_at: datetime | None = None


class ApiTokenCreated(ApiTokenOut):
    token: str = Field(description="the token itself, shown once")


class ResetLinkOut(BaseModel):
    user_id: int
    username: str
    link: str
    expires_in_s: int
