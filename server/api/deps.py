"""Every injectable in one place: settings, database sessions, storage, queue, clock, the
current user and role checks, and the per-run bearer check of the internal API.

Cookie sessions (web pages) are accepted for safe methods only; a state-changing API call must
carry a bearer token, so a forged cross-site form can never act through the API.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Annotated, cast

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from server.core.config import Settings
from server.core.db import Database
from server.core.errors import AuthRequiredError, ForbiddenError
from server.core.security import token_matches
from server.models import Run, User
from server.services.login_limit import LoginLimit
from server.services.pool_jobs import POOL_HEADER, check_run_access, credential_pool
from server.services.queue import JobQueue
from server.services.runs import LeasePolicy
from server.services.signup import SignupPolicy
from server.services.storage import Storage
from server.services.users import user_for_token

SESSION_COOKIE = "arena_session"
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def get_settings(request: Request) -> Settings:
    return cast(Settings, request.app.state.settings)


def get_db(request: Request) -> Database:
    return cast(Database, request.app.state.db)


def get_storage(request: Request) -> Storage:
    return cast(Storage, request.app.state.storage)


def get_queue(request: Request) -> JobQueue:
    return cast(JobQueue, request.app.state.queue)


def get_now(request: Request) -> datetime:
    """The clock, injectable so tests can move time (lease expiry, quotas per day)."""
    return cast(datetime, request.app.state.clock())


def get_lease_policy(settings: Annotated[Settings, Depends(get_settings)]) -> LeasePolicy:
    return LeasePolicy(lease_seconds=settings.lease_seconds,
                       max_platform_failures=settings.max_platform_failures,
                       log_cap_bytes=settings.log_cap_bytes,
                       release_backoff_s=settings.release_backoff_s,
                       release_backoff_max_s=settings.release_backoff_max_s)


def get_session(db: Annotated[Database, Depends(get_db)]) -> Iterator[Session]:
    """A read session. A write takes WriteSessionDep; its service commits (docs/internals.md)."""
    with db.sessions() as session:
        yield session


def get_write_session(db: Annotated[Database, Depends(get_db)]) -> Iterator[Session]:
    """A session whose transaction takes the write lock at once on SQLite (BEGIN IMMEDIATE)."""
    with db.write_sessions() as session:
        yield session


def get_signup_policy(settings: Annotated[Settings, Depends(get_settings)]) -> SignupPolicy:
    return SignupPolicy(settings.signup, settings.signup_invite_code,
                        tuple(settings.signup_email_domains),
                        per_address_per_hour=settings.signup_per_address_per_hour,
                        verify_email=bool(settings.smtp_host))


def get_login_limit(settings: Annotated[Settings, Depends(get_settings)]) -> LoginLimit:
    return LoginLimit(settings.login_attempts_per_window, settings.login_window_s)


def client_address(request: Request) -> str:
    """The peer address the login rate limit counts by (a proxy should set the real one)."""
    return request.client.host if request.client else "unknown"


SignupPolicyDep = Annotated[SignupPolicy, Depends(get_signup_policy)]
LoginLimitDep = Annotated[LoginLimit, Depends(get_login_limit)]
AddressDep = Annotated[str, Depends(client_address)]
SessionDep = Annotated[Session, Depends(get_session)]
WriteSessionDep = Annotated[Session, Depends(get_write_session)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
NowDep = Annotated[datetime, Depends(get_now)]


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def current_user_optional(request: Request, session: SessionDep, now: NowDep) -> User | None:
    """The authenticated user, or None for anonymous requests."""
    kind: str | None = "api"  # a web session is not a bearer token
    token = bearer_token(request)
    if token is None and request.method in SAFE_METHODS:
        token, kind = request.cookies.get(SESSION_COOKIE), None
    if token is None:
        return None
    user = user_for_token(session, token, now, kind=kind)
    if user is None:
        raise AuthRequiredError("the token is unknown, revoked or expired; log in again "
                                "(POST /api/v1/auth/token) and use the new token")
    return user


def current_user(user: Annotated[User | None, Depends(current_user_optional)]) -> User:
    if user is None:
        raise AuthRequiredError("authentication required; send 'Authorization: Bearer <token>' "
                                "(get one with POST /api/v1/auth/token)")
    return user


CurrentUser = Annotated[User, Depends(current_user)]


def current_user_brief(request: Request, db: Annotated[Database, Depends(get_db)],
                       now: NowDep) -> User:
    """The authenticated user, looked up in a session closed before the handler runs: for
    handlers that stream a body, during which an open session would hold a connection."""
    with db.session() as session:
        return current_user(current_user_optional(request, session, now))


BriefUser = Annotated[User, Depends(current_user_brief)]


def _brief_organizer(user: BriefUser) -> User:
    return check_role(user, ("organizer",))


BriefOrganizer = Annotated[User, Depends(_brief_organizer)]
OptionalUser = Annotated[User | None, Depends(current_user_optional)]


def check_role(user: User, roles: tuple[str, ...]) -> User:
    if user.role != "admin" and user.role not in roles:
        raise ForbiddenError(
            f"this needs the role {' or '.join(roles)}; you are {user.role!r} — ask an "
            "admin if you should have it")
    return user


def require_role(*roles: str) -> Callable[..., User]:
    """A dependency that lets through only users with one of `roles` (admins always pass)."""

    def check(user: CurrentUser) -> User:
        return check_role(user, roles)

    return check


Organizer = Annotated[User, Depends(require_role("organizer"))]
Admin = Annotated[User, Depends(require_role("admin"))]


def pool_credential(request: Request, db: Annotated[Database, Depends(get_db)]) -> int | None:
    """The pool whose credential the internal call carries (`X-Arena-Pool-Token`); None for an
    operator's shared worker (no header); 401 `pool.revoked` for an unknown or revoked one.
    Read in a session of its own, closed at once: a refused call writes nothing."""
    token = request.headers.get(POOL_HEADER)
    with db.sessions() as session:
        return credential_pool(session, token)


CallerPool = Annotated[int | None, Depends(pool_credential)]


def authorized_run(run_id: int, request: Request, session: WriteSessionDep,
                   caller_pool: CallerPool) -> Run:
    """The run whose per-run bearer token was presented (internal API), if the caller serves
    its phase (its pool's credential for a pool phase, none for a shared one); 401 or 403
    (`pool.forbidden`) otherwise."""
    token = bearer_token(request)
    run = session.get(Run, run_id)
    if token is None or run is None or not token_matches(token, run.run_token_hash):
        raise AuthRequiredError(f"no valid run token for run {run_id}; a re-enqueued run gets a "
                                "new token — drop this job")
    check_run_access(session, run.id, caller_pool)
    return run


RunAuth = Annotated[Run, Depends(authorized_run)]

