"""Password login (rate-limited, services/login_limit.py) and password resets by one-time link.

A reset link is issued by an admin (for anyone), by an organizer for the participants that
organizer created (services/tenancy.py `may_reset_password`: never for an account that only
takes part in their competition, which would hand them someone else's account), or mailed to
the account's address when SMTP is configured (services/mailer.py); only its sha256 is stored,
it works once and expires. Setting a new password by link ends every credential of the
account: its web sessions and its API tokens (whoever knew the old password, or was handed a
link, may have made tokens; the owner makes new ones on the profile page), and every other
open reset link. The owner changing their own password (`change_password`, knowing the current
one) may keep the API tokens; the other web sessions end either way. Each of these functions
commits its own unit of work, because a failed login must be recorded even though the call
then raises.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from server.core.errors import BadCredentialsError, ForbiddenError, NotFoundError
from server.core.security import hash_password, hash_token, new_token, verify_password
from server.models import ApiToken, AuditLog, PasswordReset, User
from server.services.login_limit import (
    LoginLimit,
    check_login_allowed,
    login_key,
    record_attempt,
)
from server.services.names import name_key
from server.services.signup import check_password
from server.services.tenancy import managed_user_ids, may_reset_password


def password_login(session: Session, username: str, password: str, address: str,
                   now: datetime, limit: LoginLimit) -> User:
    """The active user with this name and password; commits the attempt record either way.

    Raises TooManyAttemptsError (before checking anything) or BadCredentialsError. The same
    work is done whether or not the account exists (an unknown, passwordless or deactivated
    one is checked against a dummy argon2 hash), so the time of a wrong answer does not tell
    which usernames exist.
    """
    key = login_key(username)  # the limit counts the very key the account is found by
    check_login_allowed(session, key, address, now, limit)
    user = session.execute(select(User).where(User.name_key == key)).scalar_one_or_none() \
        if key else None
    stored = user.password_hash if user is not None and user.password_hash else None
    matches = verify_password(password, stored or _dummy_hash())
    ok = matches and stored is not None and user is not None and user.is_active
    record_attempt(session, key, address, ok, now, limit)
    session.commit()
    if user is None or not ok:
        raise BadCredentialsError("unknown username or wrong password; check both, or use "
                                  "'Forgot your password?' (or ask an organizer for a "
                                  "reset link)")
    return user


@lru_cache(maxsize=1)
def _dummy_hash() -> str:
    """An argon2 hash with the same parameters as real ones, of a password nobody knows."""
    return hash_password(new_token())


def issue_reset(session: Session, actor: User | None, user_id: int, now: datetime,
                ttl_s: int) -> tuple[User, str]:
    """A one-time reset token for `user_id` (committed); returns the user and the token.

    `actor` None means the account asked for it by mail. Raises NotFoundError, ForbiddenError.
    """
    user = session.get(User, user_id)
    if user is None:
        raise NotFoundError(f"no user with id {user_id}; `arena user list` shows the accounts")
    if actor is not None and actor.role != "admin" and user.role != "participant":
        raise ForbiddenError(f"{user.username!r} is an {user.role}; only an admin resets the "
                             "password of organizers and admins")
    if actor is not None and not may_reset_password(session, actor, user):
        managed = managed_user_ids(session, actor)
        if managed is not None and user.id not in managed:  # invisible to them: as if absent
            raise NotFoundError(f"no user with id {user_id}; `arena user list` shows the "
                                "accounts you manage")
        raise ForbiddenError(f"{user.username!r} made their own account; an organizer makes "
                             "reset links only for accounts they created. Its owner resets "
                             "it with 'Forgot your password?' (where the server sends mail), "
                             "or an admin makes the link", code="user.reset_not_yours")
    token = new_token()
    session.add(PasswordReset(user_id=user.id, token_hash=hash_token(token),
                              created_by=actor.id if actor else None, created_at=now,
                              expires_at=now + timedelta(seconds=ttl_s)))
    session.add(AuditLog(actor_id=actor.id if actor else None, action="user.reset_link",
                         target=f"user:{user.id}", details={"by_mail": actor is None}, at=now))
    session.commit()
    return user, token


def reset_for(session: Session, token: str, now: datetime) -> PasswordReset:
    """The live reset row of `token`; raises NotFoundError when unknown, used or expired."""
    row = session.execute(select(PasswordReset).where(
        PasswordReset.token_hash == hash_token(token))).scalar_one_or_none()
    if row is None or row.used_at is not None or row.expires_at <= now:
        raise NotFoundError("this password-reset link is unknown, already used or expired; "
                            "ask for a new one (links work once, for a day)",
                            code="reset.invalid")
    return row


def reset_password(session: Session, token: str, password: str, now: datetime) -> User:
    """Set a new password with a reset link (committed); this link and every other open one
    die, and every web session and API token of the account ends."""
    row = reset_for(session, token, now)
    check_password(password)
    user = session.get_one(User, row.user_id)
    user.password_hash = hash_password(password)
    session.execute(update(PasswordReset).where(
        PasswordReset.user_id == user.id, PasswordReset.used_at.is_(None)).values(used_at=now))
    ended = len(session.execute(delete(ApiToken).where(ApiToken.user_id == user.id)
                                .returning(ApiToken.id)).all())
    session.add(AuditLog(actor_id=user.id, action="user.password_reset",
                         target=f"user:{user.id}", details={"tokens_ended": ended}, at=now))
    session.commit()
    return user


def change_password(session: Session, user: User, current: str, new: str, *,
                    keep_api_tokens: bool, keep_session: str | None, address: str,
                    now: datetime, limit: LoginLimit) -> int:
    """The account's owner sets a new password, knowing the current one (committed; the
    guess is rate-limited as a login is). Every web session but `keep_session` (the one in
    use, if any) ends; its API tokens end too unless the owner keeps them (their own laptop's
    CLI), unlike a reset by link, which ends them all. An account made without a password
    (it logs in by API token) sets its first one here. Returns how many tokens ended."""
    if user.password_hash:
        key = login_key(user.username)
        check_login_allowed(session, key, address, now, limit)
        ok = verify_password(current, user.password_hash)
        record_attempt(session, key, address, ok, now, limit)
        if not ok:
            session.commit()
            raise BadCredentialsError("the current password is wrong; type it again (or log "
                                      "out and use 'Forgot your password?')")
    check_password(new)
    user.password_hash = hash_password(new)
    ending = delete(ApiToken).where(ApiToken.user_id == user.id)
    if keep_api_tokens:
        ending = ending.where(ApiToken.kind != "api")
    if keep_session is not None:
        ending = ending.where(ApiToken.token_hash != hash_token(keep_session))
    ended = len(session.execute(ending.returning(ApiToken.id)).all())
    session.add(AuditLog(actor_id=user.id, action="user.password_change",
                         target=f"user:{user.id}",
                         details={"tokens_ended": ended, "kept_api_tokens": keep_api_tokens},
                         at=now))
    session.commit()
    return ended


def user_by_email_or_name(session: Session, who: str) -> User | None:
    """The active account whose username or email is `who` (for 'forgot my password')."""
    who = who.strip().lower()
    return session.execute(select(User).where(
        User.is_active.is_(True),
        (User.name_key == name_key(who)) | (func.lower(User.email) == who))
    ).scalars().first()
