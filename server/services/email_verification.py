"""Verifying a self-made account's e-mail address by mail (issue 33.12), where the server sends
mail (ARENA_SMTP_HOST): sign-up mails a link; until it is opened the account may log in and
look around but not take part (join or submit), so one mailbox holds one working account.

The link carries an HMAC of the account id and its normalized address under the server's
secret key: nothing to store, it cannot be guessed, and it dies if the address changes.
Opening it again after it worked says so and changes nothing.
"""

from __future__ import annotations

import hmac
from datetime import datetime

from sqlalchemy.orm import Session

from server.core.config import Settings
from server.core.errors import ForbiddenError, NotFoundError
from server.core.security import same_secret
from server.models import AuditLog, User
from server.services.mailer import send_verify_mail, smtp_config


def verification_token(secret_key: str, user: User) -> str:
    return hmac.new(secret_key.encode(), f"verify-email:{user.id}:{user.email_key}".encode(),
                    "sha256").hexdigest()


def verification_link(base_url: str, secret_key: str, user: User) -> str:
    return f"{base_url.rstrip('/')}/verify-email/{user.id}/{verification_token(secret_key, user)}"


def mail_verification(settings: Settings, user: User) -> bool:
    """Mail the verification link when the account waits for one and SMTP is configured."""
    config = smtp_config(settings)
    if config is None or not user.email_verify_pending or not user.email:
        return False
    return send_verify_mail(config, user.email, user.username, verification_link(
        settings.public_base_url, settings.secret_key, user))


def confirm_email(session: Session, secret_key: str, user_id: int, token: str,
                  now: datetime) -> User:
    """Mark the account's address verified (committed); NotFoundError for a wrong link."""
    user = session.get(User, user_id)
    if user is None or not user.email_key or not same_secret(
            token, verification_token(secret_key, user)):
        raise NotFoundError("this verification link is unknown; open the newest link we "
                            "mailed you, whole (some mail programs cut long links)",
                            code="email.bad_link")
    if user.email_verify_pending:
        user.email_verify_pending = False
        session.add(AuditLog(actor_id=user.id, action="user.email_verified",
                             target=f"user:{user.id}", details={}, at=now))
        session.commit()
    return user


def check_verified(user: User) -> None:
    """Raise ForbiddenError (`account.unverified`) while the account's address is unverified."""
    if user.email_verify_pending:
        raise ForbiddenError(
            f"verify your e-mail address first: open the link we mailed to {user.email} when "
            "you signed up (look in the spam folder too), then try again",
            code="account.unverified")
