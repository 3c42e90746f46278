"""Accounts as organizers manage them (`arena user list|revoke`, GET /api/v1/users): who may see
and revoke whom. An organizer lists and revokes only participants they manage (services/tenancy.py:
accounts they created, or that take part in a competition they organize — every other account
is invisible to them, as if it did not exist); an admin anyone but themselves (so the last way
in is never locked by mistake). Revoking deactivates the account and deletes every
token it holds — API tokens and web sessions — and is written to the audit log.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.core.errors import ForbiddenError, InvalidInputError, NotFoundError
from server.models import ApiToken, AuditLog, User
from server.services.tenancy import managed_user_ids


def list_accounts(session: Session, actor: User, role: str | None = None) -> list[dict[str, Any]]:
    """The accounts `actor` manages (participants for an organizer), with their token count."""
    query = select(User, func.count(ApiToken.id)).outerjoin(  # API tokens, not web sessions
        ApiToken, (ApiToken.user_id == User.id) & (ApiToken.kind == "api")
    ).group_by(User.id).order_by(User.id)
    managed = managed_user_ids(session, actor)
    if managed is not None:
        query = query.where(User.role == "participant", User.id.in_(managed))
    if role is not None:
        query = query.where(User.role == role)
    return [{"user": user, "tokens": count} for user, count in session.execute(query).all()]


def revoke_account(session: Session, actor: User, user_id: int, now: datetime) -> User:
    """Deactivate user `user_id` and delete its tokens (committed); raises NotFoundError,
    ForbiddenError."""
    user = session.get(User, user_id)
    managed = managed_user_ids(session, actor)
    if user is None or (managed is not None and user.role == "participant"
                        and user.id not in managed):
        raise NotFoundError(f"no user with id {user_id}; `arena user list` shows the accounts")
    username = user.username
    if user.id == actor.id:
        raise InvalidInputError("you cannot revoke your own account; ask another admin",
                                code="user.self_revoke")
    if actor.role != "admin" and user.role != "participant":
        raise ForbiddenError(f"{username!r} is an {user.role}; only an admin revokes "
                             "organizers and admins")
    tokens = session.execute(select(ApiToken).where(ApiToken.user_id == user.id)).scalars()
    removed = 0
    for token in tokens:
        session.delete(token)
        removed += 1
    user.is_active = False
    session.add(AuditLog(actor_id=actor.id, action="user.revoke", target=f"user:{user.id}",
                         details={"tokens_deleted": removed}, at=now))
    session.commit()
    return user
