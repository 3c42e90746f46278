"""Accounts people make themselves, over the API: sign-up (the platform's `signup` setting
decides who may), the caller's own API tokens by name, and password-reset links that an
organizer (for participants) or an admin (for anyone) issues. Routes are thin: the services
(signup, api_tokens, passwords) own their transactions.
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from server.api.deps import (
    AddressDep,
    CurrentUser,
    LoginLimitDep,
    NowDep,
    Organizer,
    SettingsDep,
    SignupPolicyDep,
    WriteSessionDep,
)
from server.schemas.accounts import (
    ApiTokenCreated,
    ApiTokenOut,
    PasswordChangeIn,
    ResetLinkOut,
    SignupIn,
    SignupOut,
    TokenIn,
)
from server.schemas.auth import UserOut
from server.services import api_tokens, passwords
from server.services.email_verification import mail_verification
from server.services.token_grants import sign_up_with_token

router = APIRouter(prefix="/api/v1", tags=["accounts"])


@router.post("/auth/signup", response_model=SignupOut, status_code=201)
def signup(body: SignupIn, policy: SignupPolicyDep, session: WriteSessionDep,
           now: NowDep, address: AddressDep, settings: SettingsDep) -> SignupOut:
    """Make a participant account (if the server's sign-up setting allows; a few per client
    address an hour, one per e-mail address); returns an API token named 'signup', shown
    once. Where the server sends mail, the account verifies its address (a mailed link)
    before it may take part."""
    user, token = sign_up_with_token(session, policy, username=body.username,
                                     email=body.email, password=body.password,
                                     invite_code=body.invite_code, now=now, address=address)
    mail_verification(settings, user)
    return SignupOut(user=UserOut.model_validate(user), token=token)


@router.get("/me/tokens", response_model=list[ApiTokenOut])
def my_tokens(user: CurrentUser, session: WriteSessionDep) -> list[ApiTokenOut]:
    """The caller's API tokens by name (never their value; web sessions are not listed)."""
    return [ApiTokenOut.model_validate(t) for t in api_tokens.list_tokens(session, user)]


@router.post("/me/tokens", response_model=ApiTokenCreated, status_code=201)
def create_my_token(body: TokenIn, user: CurrentUser, session: WriteSessionDep,
                    now: NowDep) -> ApiTokenCreated:
    """A new named API token for the caller, shown once."""
    row, plain = api_tokens.create_token(session, user, body.name, now)
    return ApiTokenCreated(**ApiTokenOut.model_validate(row).model_dump(), token=plain)


@router.delete("/me/tokens/{token_id}", status_code=204)
def revoke_my_token(token_id: int, user: CurrentUser, session: WriteSessionDep,
                    now: NowDep) -> None:
    """Revoke one of the caller's API tokens (404 for anyone else's)."""
    api_tokens.revoke_own_token(session, user, token_id, now)


@router.post("/me/password", status_code=204)
def change_my_password(body: PasswordChangeIn, user: CurrentUser, session: WriteSessionDep,
                       now: NowDep, limit: LoginLimitDep, address: AddressDep) -> None:
    """Set a new password, giving the current one (rate-limited as a login). Every web
    session ends, and every API token (this one too) unless `keep_api_tokens` is true."""
    passwords.change_password(session, user, body.current_password, body.new_password,
                              keep_api_tokens=body.keep_api_tokens, keep_session=None,
                              address=address, now=now, limit=limit)


@router.post("/users/{user_id}/reset-link", response_model=ResetLinkOut)
def reset_link(user_id: int, actor: Organizer, session: WriteSessionDep, now: NowDep,
               settings: SettingsDep, request: Request) -> ResetLinkOut:
    """A one-time password-reset link for an account (admins: any; organizers: participants
    they created); hand it to its owner, who opens it and chooses a new password, which ends
    every session and API token of the account."""
    user, token = passwords.issue_reset(session, actor, user_id, now,
                                        settings.password_reset_ttl_s)
    return ResetLinkOut(user_id=user.id, username=user.username,
                        link=f"{settings.public_url_for(str(request.base_url))}/reset/{token}",
                        expires_in_s=settings.password_reset_ttl_s)
