"""Account pages: sign up, the profile page (the account's API tokens by name: create, shown
once, and revoke), and password reset by one-time link (from an organizer, or mailed when
SMTP is configured). Sign-up and the reset forms carry a double-submit CSRF cookie, as the
login form does (there is no session yet); profile forms the session's CSRF token. Each
handler calls one service, which owns its transaction.
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response
from sqlalchemy.orm import Session
from starlette.datastructures import FormData

from server.api.deps import (
    SESSION_COOKIE,
    AddressDep,
    LoginLimitDep,
    NowDep,
    OptionalUser,
    SettingsDep,
    SignupPolicyDep,
    get_db,
)
from server.core.config import Settings
from server.core.db import Database
from server.core.errors import (
    ArenaError,
    AuthRequiredError,
    CsrfError,
    NotFoundError,
    describe_error,
)
from server.core.security import same_secret
from server.models import User
from server.services import api_tokens, passwords
from server.services.email_verification import confirm_email, mail_verification
from server.services.mailer import send_reset_mail, smtp_config
from server.services.signup import sign_up
from server.web.rendering import (
    PageRoute,
    check_csrf,
    login_redirect,
    render,
    safe_next,
    web_message,
)
from server.web.sessions import cookie_user, open_session, with_session_cookie

router = APIRouter(include_in_schema=False, route_class=PageRoute)
FORM_COOKIE = "arena_form_csrf"


def _with_form_nonce(request: Request, name: str, user: User | None, settings: Settings,
                     status: int = 200, **context: Any) -> Response:
    """A page whose form is checked by a double-submit cookie (no session needed)."""
    nonce = secrets.token_urlsafe(24)
    response = render(request, name, user, settings, status=status, form_csrf=nonce, **context)
    response.set_cookie(FORM_COOKIE, nonce, max_age=3600, httponly=True, samesite="lax",
                        secure=settings.session_cookie_secure)
    return response


def _check_form_nonce(request: Request, form: FormData) -> None:
    if not same_secret(form.get("csrf_token"), request.cookies.get(FORM_COOKIE, "")):
        raise CsrfError("the form's CSRF token is missing or wrong; reload the page and retry")


def _message(exc: ArenaError) -> str:
    return web_message(describe_error(exc)[1]["error"]["message"])


@router.get("/signup")
def signup_page(request: Request, user: OptionalUser, settings: SettingsDep,
                policy: SignupPolicyDep) -> Response:
    return _with_form_nonce(request, "signup.html", user, settings, policy=policy, values={},
                            next_path=safe_next(request.query_params.get("next")))


@router.post("/signup")
async def signup(request: Request, settings: SettingsDep, policy: SignupPolicyDep,
                 now: NowDep, address: AddressDep,
                 db: Annotated[Database, Depends(get_db)]) -> Response:
    """Make the account and log it in at once (a web session, not an API token)."""
    form = await request.form()
    _check_form_nonce(request, form)
    values = {k: str(form.get(k, "")) for k in ("username", "email", "invite_code")}
    next_path = safe_next(str(form.get("next", "")))  # e.g. the team invite that sent them
    try:
        with db.session(write=True) as session:
            user = sign_up(session, policy, password=str(form.get("password", "")),
                           now=now, address=address, **values)
            token = open_session(session, user, now)
            session.flush()
            session.expunge(user)  # read after the commit, to mail the verification link
    except ArenaError as exc:
        return _with_form_nonce(request, "signup.html", None, settings,
                                status=describe_error(exc)[0], policy=policy, values=values,
                                error=_message(exc), next_path=next_path)
    mail_verification(settings, user)
    response = RedirectResponse(next_path or "/?welcome=1", status_code=303)
    response.delete_cookie(FORM_COOKIE)
    return with_session_cookie(response, token, settings)


@router.get("/profile")
def profile_page(request: Request, user: OptionalUser, now: NowDep, settings: SettingsDep,
                 db: Annotated[Database, Depends(get_db)], mailed: int | None = None) -> Response:
    if user is None:
        return login_redirect(request)
    with db.session() as session:
        tokens = api_tokens.list_tokens(session, user)
    return render(request, "profile.html", user, settings, tokens=tokens, created=None,
                  mailed=mailed)


@router.post("/profile/tokens")
async def create_token(request: Request, settings: SettingsDep, now: NowDep,
                       db: Annotated[Database, Depends(get_db)]) -> Response:
    """Create a named API token and show it on the page, once (never stored in the clear)."""
    form = await request.form()
    check_csrf(request, settings, form.get("csrf_token"))
    with db.session(write=True) as session:
        user = _signed_in(request, session, now)
        error, created = None, None
        try:
            row, plain = api_tokens.create_token(session, user, str(form.get("name", "")), now)
            created = {"name": row.name, "token": plain}
        except ArenaError as exc:
            error = _message(exc)
        tokens = api_tokens.list_tokens(session, user)
        return render(request, "profile.html", user, settings, tokens=tokens, created=created,
                      error=error, status=201 if created else 422)


@router.post("/profile/tokens/{token_id}/revoke")
async def revoke_token(token_id: int, request: Request, settings: SettingsDep, now: NowDep,
                       db: Annotated[Database, Depends(get_db)]) -> Response:
    check_csrf(request, settings, (await request.form()).get("csrf_token"))
    with db.session(write=True) as session:
        api_tokens.revoke_own_token(session, _signed_in(request, session, now), token_id, now)
    return RedirectResponse("/profile", status_code=303)


@router.post("/profile/password")
async def change_password(request: Request, settings: SettingsDep, now: NowDep,
                          limit: LoginLimitDep, address: AddressDep,
                          db: Annotated[Database, Depends(get_db)]) -> Response:
    """The owner changes their password: other browsers are logged out, and the API tokens
    end unless they tick "keep my API tokens" (a reset by link ends them all)."""
    form = await request.form()
    check_csrf(request, settings, form.get("csrf_token"))
    with db.session(write=True) as session:
        user = _signed_in(request, session, now)
        status, error = 200, None
        try:
            passwords.change_password(
                session, user, str(form.get("current_password", "")),
                str(form.get("password", "")), keep_api_tokens=form.get("keep_tokens") == "1",
                keep_session=request.cookies.get(SESSION_COOKIE), address=address, now=now,
                limit=limit)
        except ArenaError as exc:
            status, error = describe_error(exc)[0], _message(exc)
        return render(request, "profile.html", user, settings, status=status, error=error,
                      tokens=api_tokens.list_tokens(session, user), created=None,
                      password_changed=error is None)


def _signed_in(request: Request, session: Session, now: datetime) -> User:
    user = cookie_user(request, session, now)
    if user is None:
        raise AuthRequiredError("log in again to manage your API tokens")
    return user


@router.get("/verify-email/{user_id}/{token}")
def verify_email(user_id: int, token: str, request: Request, user: OptionalUser,
                 settings: SettingsDep, now: NowDep,
                 db: Annotated[Database, Depends(get_db)]) -> Response:
    """The link mailed at sign-up: the account's address is verified (it may take part)."""
    with db.session(write=True) as session:
        confirm_email(session, settings.secret_key, user_id, token, now)
    return render(request, "verified.html", user, settings)


@router.post("/profile/verify-email")
async def resend_verification(request: Request, settings: SettingsDep, now: NowDep,
                              db: Annotated[Database, Depends(get_db)]) -> Response:
    """Mail the verification link again (the profile page offers it while it is pending)."""
    check_csrf(request, settings, (await request.form()).get("csrf_token"))
    with db.session() as session:
        user = _signed_in(request, session, now)
        session.expunge(user)
    if not user.email_verify_pending:
        raise NotFoundError("your e-mail address needs no verification", code="email.verified")
    sent = mail_verification(settings, user)
    return RedirectResponse(f"/profile?mailed={int(sent)}", status_code=303)


@router.get("/reset/{token}")
def reset_page(token: str, request: Request, user: OptionalUser, settings: SettingsDep,
               now: NowDep, db: Annotated[Database, Depends(get_db)]) -> Response:
    with db.session() as session:
        passwords.reset_for(session, token, now)  # an unknown link is a 404 page
    return _with_form_nonce(request, "reset.html", user, settings, token=token)


@router.post("/reset/{token}")
async def reset(token: str, request: Request, settings: SettingsDep, now: NowDep,
                db: Annotated[Database, Depends(get_db)]) -> Response:
    form = await request.form()
    _check_form_nonce(request, form)
    try:
        with db.session(write=True) as session:
            passwords.reset_password(session, token, str(form.get("password", "")), now)
    except ArenaError as exc:
        if getattr(exc, "code", "") == "reset.invalid":
            raise
        return _with_form_nonce(request, "reset.html", None, settings, token=token,
                                status=describe_error(exc)[0], error=_message(exc))
    return render(request, "reset.html", None, settings, done=True, token=token)


@router.get("/forgot")
def forgot_page(request: Request, user: OptionalUser, settings: SettingsDep) -> Response:
    return _with_form_nonce(request, "forgot.html", user, settings,
                            mail=smtp_config(settings) is not None)


@router.post("/forgot")
async def forgot(request: Request, settings: SettingsDep, now: NowDep,
                 db: Annotated[Database, Depends(get_db)]) -> Response:
    """Mail a reset link when SMTP is configured; the answer is the same whether or not the
    account exists, so the form tells nobody which accounts there are."""
    form = await request.form()
    _check_form_nonce(request, form)
    config = smtp_config(settings)
    if config is not None:
        with db.session(write=True) as session:
            user = passwords.user_by_email_or_name(session, str(form.get("who", "")))
            if user is not None and user.email:
                user, token = passwords.issue_reset(session, None, user.id, now,
                                                    settings.password_reset_ttl_s)
                email, name = user.email, user.username
            else:
                email = None
        if email:
            send_reset_mail(config, email, name,
                            f"{settings.public_base_url.rstrip('/')}/reset/{token}")
    return _with_form_nonce(request, "forgot.html", None, settings, mail=config is not None,
                            sent=config is not None)
