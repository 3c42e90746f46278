"""Users and tokens: password login, account creation by staff, and /me."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from server.api.deps import (
    AddressDep,
    CurrentUser,
    LoginLimitDep,
    NowDep,
    Organizer,
    SessionDep,
    WriteSessionDep,
)
from server.api.paging import PageDep, paged
from server.schemas.auth import (
    AccountOut,
    Role,
    TokenOut,
    TokenRequest,
    UserCreate,
    UserCreated,
    UserOut,
)
from server.services import accounts
from server.services.token_grants import create_account, login_token

router = APIRouter(prefix="/api/v1", tags=["auth"])


@router.post("/auth/token", response_model=TokenOut)
def create_token(body: TokenRequest, session: WriteSessionDep, now: NowDep,
                 limit: LoginLimitDep, address: AddressDep) -> TokenOut:
    """Exchange username + password for an API token (shown once); failed attempts are
    rate-limited per account and per address (429 with Retry-After)."""
    user, token = login_token(session, body.username, body.password, address, now, limit)
    return TokenOut(token=token, user=UserOut.model_validate(user))


@router.post("/users", response_model=UserCreated, status_code=201)
def create_user(body: UserCreate, actor: Organizer, session: WriteSessionDep,
                now: NowDep) -> UserCreated:
    """Create an account (organizers: participants only; admins: any role)."""
    user, token = create_account(session, actor, username=body.username, role=body.role,
                                 password=body.password, email=body.email,
                                 with_token=body.issue_token, now=now)
    return UserCreated(**UserOut.model_validate(user).model_dump(), token=token)


@router.get("/users", response_model=list[AccountOut])
def list_users(request: Request, response: Response, actor: Organizer, session: SessionDep,
               page: PageDep, role: Role | None = None) -> list[AccountOut]:
    """The accounts you manage (organizers: participants; admins: everyone), `limit` at a
    time (`Link` names the next page)."""
    rows = paged(request, response, page, accounts.list_accounts(session, actor, role))
    return [AccountOut(**UserOut.model_validate(row["user"]).model_dump(),
                       is_active=row["user"].is_active, tokens=row["tokens"]) for row in rows]


@router.post("/users/{user_id}/revoke", response_model=AccountOut)
def revoke_user(user_id: int, actor: Organizer, session: WriteSessionDep,
                now: NowDep) -> AccountOut:
    """Deactivate an account and delete its tokens (audited); its submissions stay."""
    user = accounts.revoke_account(session, actor, user_id, now)
    return AccountOut(**UserOut.model_validate(user).model_dump(), is_active=False, tokens=0)


@router.get("/me", response_model=UserOut)
def me(user: CurrentUser) -> UserOut:
    return UserOut.model_validate(user)
