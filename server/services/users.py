"""Users and tokens: creation, password login, token lookup, and the admin bootstrap."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core.errors import ConflictError, InvalidInputError
from server.core.security import hash_password, hash_token, new_token
from server.models import ROLES, ApiToken, AuditLog, User
from server.services.names import check_name, name_key
from server.services.reserved_names import check_not_reserved
from server.services.signup import check_email_free


def create_user(session: Session, *, username: str, role: str, password: str | None,
                email: str | None, actor: User | None) -> User:
    """Create a user; only admins may create organizers or admins."""
    if role not in ROLES:
        raise InvalidInputError(f"role {role!r} is unknown; expected one of {list(ROLES)}")
    if actor is not None and actor.role != "admin" and role != "participant":
        raise InvalidInputError(
            f"an {actor.role} may create participants only; ask an admin for a {role!r} account",
            code="auth.forbidden_role",
        )
    username = check_name(username, "username")
    if actor is not None and actor.role != "admin":
        check_not_reserved(username)
    if session.execute(select(User.id).where(User.name_key == name_key(username))).first():
        raise ConflictError(f"the username {username!r} is taken; choose another",
                            code="user.exists")
    key = check_email_free(session, email) if email else None  # one account per address
    user = User(username=username, role=role, email=email, email_key=key,
                password_hash=hash_password(password) if password else None)
    session.add(user)
    session.flush()
    session.add(AuditLog(actor_id=actor.id if actor else None, action="user.create",
                         target=f"user:{user.id}", details={"role": role}))
    return user


def issue_token(session: Session, user: User, *, kind: str = "api", name: str | None = None,
                ttl: timedelta | None = None, now: datetime) -> str:
    """Create a token for `user`; the plain token is returned once and never stored."""
    token = new_token()
    session.add(ApiToken(user_id=user.id, token_hash=hash_token(token), kind=kind, name=name,
                         created_at=now, expires_at=now + ttl if ttl else None))
    session.flush()
    return token


def user_for_token(session: Session, token: str, now: datetime,
                   kind: str | None = None) -> User | None:
    """The active user holding `token`, or None (unknown, expired, deactivated, or not of
    `kind` when one is given: a web session's cookie is not an API token)."""
    row = session.execute(
        select(ApiToken).where(ApiToken.token_hash == hash_token(token))
    ).scalar_one_or_none()
    if row is None or (kind is not None and row.kind != kind) \
            or (row.expires_at is not None and row.expires_at <= now):
        return None
    user = session.get(User, row.user_id)
    return user if user is not None and user.is_active else None


def revoke_token(session: Session, token: str) -> None:
    row = session.execute(
        select(ApiToken).where(ApiToken.token_hash == hash_token(token))
    ).scalar_one_or_none()
    if row is not None:
        session.delete(row)


class AdminBootstrapError(RuntimeError):
    """The bootstrap admin's name is held by an account that is not an admin."""


def bootstrap_admin(session: Session, token: str, now: datetime,
                    username: str = "admin") -> User:
    """Make sure the admin `username` exists and accepts `token` (idempotent, first start).

    Refuses (AdminBootstrapError) when the name, or one that looks like it, is held by an
    account that is not an admin: the token would make someone who signed up as "admin" the
    platform's admin (issue 33.11; sign-up now refuses reserved names, services/reserved_names.py,
    but a database from before may hold one)."""
    admin = session.execute(select(User).where(
        User.name_key == name_key(username))).scalar_one_or_none()
    if admin is not None and admin.role != "admin":
        raise AdminBootstrapError(
            f"refusing to start: ARENA_ADMIN_BOOTSTRAP_TOKEN would go to the {admin.role} "
            f"account {admin.username!r} (id {admin.id}), which someone made for themselves, "
            f"not to an admin. Fix: set ARENA_ADMIN_BOOTSTRAP_USERNAME to a name nobody holds "
            f"(e.g. 'ops-admin'), then revoke {admin.username!r} with that admin "
            f"(`arena user revoke {admin.username}`)")
    if admin is None:
        admin = User(username=username, role="admin", created_at=now)
        session.add(admin)
        session.flush()
    if user_for_token(session, token, now) is None:
        session.add(ApiToken(user_id=admin.id, token_hash=hash_token(token), kind="api",
                             name="bootstrap", created_at=now))
    return admin
