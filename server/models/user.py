"""People and their credentials: users, API tokens (hashed) and the audit trail."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, ForeignKey, Integer, String, false
from sqlalchemy.engine.default import DefaultExecutionContext
from sqlalchemy.orm import Mapped, mapped_column, relationship

from server.models.base import Base, UTCDateTime, utcnow
from server.services.names import name_key

ROLES = ("participant", "organizer", "admin")


def _username_key(context: DefaultExecutionContext) -> str:
    return name_key(context.get_current_parameters()["username"])  # type: ignore[no-untyped-call]


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    username: Mapped[str] = mapped_column(String(64), unique=True)
    # Issue 33: the TR39 skeleton of the username (services/names.py): "ada_I" and "ADA_l" are
    # one account name. Logins look it up by this key.
    name_key: Mapped[str] = mapped_column(String(255), unique=True, default=_username_key)
    email: Mapped[str | None] = mapped_column(String(255))
    # Issue 33.12 (migration 0012): the normalized address, unique (services/signup.py
    # `email_key`); where the account signed up from (the per-address sign-up limit); and
    # whether it still has to verify its address (signed up while the server sends mail).
    email_key: Mapped[str | None] = mapped_column(String(255), unique=True)
    signup_address: Mapped[str | None] = mapped_column(String(64), index=True)
    email_verify_pending: Mapped[bool] = mapped_column(Boolean, default=False,
                                                       server_default=false())
    role: Mapped[str] = mapped_column(String(16), default="participant")
    password_hash: Mapped[str | None] = mapped_column(String(255))
    is_active: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    tokens: Mapped[list[ApiToken]] = relationship(back_populates="user")


class ApiToken(Base):
    """A bearer token; `kind` is 'api' (CLI, HTTP) or 'session' (web cookie, expires)."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    kind: Mapped[str] = mapped_column(String(16), default="api")
    name: Mapped[str | None] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    user: Mapped[User] = relationship(back_populates="tokens")


class AuditLog(Base):
    """Who did what to which object; written in the same transaction as the change."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    actor_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    action: Mapped[str] = mapped_column(String(64), index=True)
    target: Mapped[str] = mapped_column(String(128))
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
