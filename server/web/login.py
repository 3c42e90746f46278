"""Logging in and out of the web site.

Login exchanges a password or an API token for a separate session token kept in an HttpOnly,
SameSite=Lax cookie (server/web/sessions.py); the login form carries a double-submit CSRF
cookie, every later form an HMAC of the session token (server/web/rendering.py).
"""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from server.api.deps import (
    SESSION_COOKIE,
    AddressDep,
    LoginLimitDep,
    NowDep,
    OptionalUser,
    SettingsDep,
    get_db,
)
from server.core.config import Settings
from server.core.db import Database
from server.core.errors import (
    BadCredentialsError,
    CsrfError,
    TooManyAttemptsError,
    describe_error,
)
from server.core.security import same_secret
from server.models import User
from server.services import users as user_service
from server.services.passwords import password_login
from server.services.tenancy import is_staff
from server.web.rendering import (
    LOGIN_REASONS,
    PageRoute,
    check_csrf,
    render,
    safe_next,
    web_message,
)
from server.web.sessions import open_session, with_session_cookie

router = APIRouter(include_in_schema=False, route_class=PageRoute)
LOGIN_COOKIE = "arena_login_csrf"


@router.get("/login")
def login_page(request: Request, settings: SettingsDep, user: OptionalUser) -> Response:
    return _login_form(request, settings, user=user)


def _login_form(request: Request, settings: Settings, status: int = 200,
                error: str | None = None, next_path: str | None = None,
                user: User | None = None) -> Response:
    """The form, with the reason the visitor was sent here (a fixed text chosen by key) and
    the page to return to afterwards."""
    nonce = secrets.token_urlsafe(24)
    why = LOGIN_REASONS.get(request.query_params.get("why", ""))
    next_path = safe_next(next_path or request.query_params.get("next"))
    response = render(request, "login.html", user, settings, status=status, error=error,
                      login_csrf=nonce, why=why, next_path=next_path or "")
    response.set_cookie(LOGIN_COOKIE, nonce, max_age=3600, httponly=True, samesite="lax",
                        secure=settings.session_cookie_secure)
    return response


@router.post("/login")
async def login(request: Request, db: Annotated[Database, Depends(get_db)],
                settings: SettingsDep, now: NowDep, limit: LoginLimitDep,
                address: AddressDep) -> Response:
    """Log in with username and password (rate-limited), or by pasting an API token; either
    way the browser gets a web session, not an API token (server/web/sessions.py)."""
    form = await request.form()
    if not same_secret(form.get("csrf_token"), request.cookies.get(LOGIN_COOKIE, "")):
        raise CsrfError("the login form's CSRF token is missing or wrong; reload the page "
                        "and retry")
    token, username = str(form.get("token", "")).strip(), str(form.get("username", "")).strip()
    next_path = str(form.get("next", ""))
    with db.session(write=True) as session:
        user: User | None
        if username:
            try:
                user = password_login(session, username, str(form.get("password", "")),
                                      address, now, limit)
            except (BadCredentialsError, TooManyAttemptsError) as exc:
                status, body = describe_error(exc)
                return _login_form(request, settings, status=status, next_path=next_path,
                                   error=web_message(body["error"]["message"]))
        else:
            user = user_service.user_for_token(session, token, now, kind="api") \
                if token else None
        if user is None:
            return _login_form(request, settings, status=401, next_path=next_path,
                               error="Unknown or expired token; check it (it is the long "
                                     "string from your profile page or your organizer, or "
                                     "the one `arena login` uses) and try again.")
        session_token = open_session(session, user, now)
        landing = "/organizer" if is_staff(user) else "/my"
    response = RedirectResponse(safe_next(next_path) or landing, status_code=303)
    response.delete_cookie(LOGIN_COOKIE)
    return with_session_cookie(response, session_token, settings)


@router.post("/logout")
async def logout(request: Request, db: Annotated[Database, Depends(get_db)],
                 settings: SettingsDep) -> Response:
    check_csrf(request, settings, str((await request.form()).get("csrf_token", "")))
    with db.session(write=True) as session:
        user_service.revoke_token(session, request.cookies[SESSION_COOKIE])
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(SESSION_COOKIE)
    return response
