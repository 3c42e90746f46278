"""An account's own API tokens, by name: list, create (the token is shown once) and revoke.

Only `kind == "api"` tokens are listed or touched here: web sessions are cookies, not API
tokens, and do not appear on the profile page. A token belongs to exactly one account; revoking
another account's token id answers not found, as if it did not exist.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core.errors import InvalidInputError, NotFoundError
from server.models import ApiToken, AuditLog, User
from server.services.users import issue_token

MAX_TOKENS = 50


def list_tokens(session: Session, user: User) -> list[ApiToken]:
    return list(session.execute(select(ApiToken).where(
        ApiToken.user_id == user.id, ApiToken.kind == "api").order_by(ApiToken.id)).scalars())


def create_token(session: Session, user: User, name: str, now: datetime) -> tuple[ApiToken, str]:
    """A new named API token (committed); returns the row and the plain token (shown once)."""
    name = name.strip()
    if not 1 <= len(name) <= 128:
        raise InvalidInputError(f"a token name has 1 to 128 characters, got {len(name)}; name "
                                "it after where it is used, e.g. 'laptop' or 'cluster'",
                                code="token.bad_name")
    if len(list_tokens(session, user)) >= MAX_TOKENS:
        raise InvalidInputError(f"this account holds {MAX_TOKENS} API tokens already; revoke "
                                "some on your profile page first", code="token.too_many")
    plain = issue_token(session, user, name=name, now=now)
    row = session.execute(select(ApiToken).where(ApiToken.user_id == user.id)
                          .order_by(ApiToken.id.desc()).limit(1)).scalar_one()
    session.add(AuditLog(actor_id=user.id, action="token.create", target=f"user:{user.id}",
                         details={"token_id": row.id, "name": name}, at=now))
    session.commit()
    return row, plain


def revoke_own_token(session: Session, user: User, token_id: int, now: datetime) -> None:
    """Delete the caller's API token `token_id` (committed); NotFoundError if not theirs."""
    row = session.get(ApiToken, token_id)
    if row is None or row.user_id != user.id or row.kind != "api":
        raise NotFoundError(f"you hold no API token with id {token_id}; your profile page "
                            "lists yours")
    session.delete(row)
    session.add(AuditLog(actor_id=user.id, action="token.revoke", target=f"user:{user.id}",
                         details={"token_id": token_id, "name": row.name}, at=now))
    session.commit()
