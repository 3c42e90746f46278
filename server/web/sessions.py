"""Web sessions: the cookie a browser holds after logging in (by password or by pasting an API
token) or signing up. A session is its own kind of token (`kind="session"`, expires after 7
days): it is never accepted as a bearer token by the API and never listed among the account's
API tokens, so logging in on the web no longer mints API tokens."""

from __future__ import annotations

from datetime import datetime, timedelta

from fastapi import Request
from fastapi.responses import RedirectResponse
from sqlalchemy.orm import Session

from server.api.deps import SESSION_COOKIE
from server.core.config import Settings
from server.models import User
from server.services import users as user_service

SESSION_TTL = timedelta(days=7)


def open_session(session: Session, user: User, now: datetime) -> str:
    """A new web-session token for `user` (flushed; the caller commits)."""
    return user_service.issue_token(session, user, kind="session", ttl=SESSION_TTL,
                                    name="web", now=now)


def with_session_cookie(response: RedirectResponse, token: str,
                        settings: Settings) -> RedirectResponse:
    response.set_cookie(SESSION_COOKIE, token, max_age=int(SESSION_TTL.total_seconds()),
                        httponly=True, samesite="lax", secure=settings.session_cookie_secure)
    return response


def cookie_user(request: Request, session: Session, now: datetime) -> User | None:
    """The user of this request's session cookie, or None."""
    cookie = request.cookies.get(SESSION_COOKIE)
    return user_service.user_for_token(session, cookie, now, kind="session") if cookie else None
