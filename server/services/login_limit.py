"""The password-login rate limit: too many failed attempts for one account, or from one client
address, within a sliding window refuse further attempts (429, with when to retry) before the
password is even checked, so guessing costs the attacker the window, not one argon2 hash.

Attempts are rows (`LoginAttempt`), so every server process and restart sees one count. A
success does not wipe the failures (an attacker who also holds one account must not reset
another's count); the window alone ages them out. An address may fail five times as often as
an account, so a shared NAT is not locked out by one person's typos.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from server.core.errors import TooManyAttemptsError
from server.models import LoginAttempt

ADDRESS_FACTOR = 5


@dataclass(frozen=True)
class LoginLimit:
    """At most `attempts` failures per account per `window_s` seconds."""

    attempts: int = 10
    window_s: int = 900


def check_login_allowed(session: Session, username: str, address: str, now: datetime,
                        limit: LoginLimit) -> None:
    """Raise TooManyAttemptsError when `username` or `address` failed too often lately."""
    since = now - timedelta(seconds=limit.window_s)
    failed = select(func.count(LoginAttempt.id), func.min(LoginAttempt.at)).where(
        LoginAttempt.ok.is_(False), LoginAttempt.at > since)
    for column, value, allowed, what in (
            (LoginAttempt.username, username.lower(), limit.attempts, "this account"),
            (LoginAttempt.address, address, limit.attempts * ADDRESS_FACTOR, "your address")):
        count, oldest = session.execute(failed.where(column == value)).one()
        if count >= allowed:
            retry = max(1, int((oldest + timedelta(seconds=limit.window_s) - now)
                               .total_seconds()) + 1)
            raise TooManyAttemptsError(
                f"too many failed logins for {what} ({count} in the last "
                f"{limit.window_s // 60} min); wait {retry} s and try again, or ask an "
                "organizer for a password-reset link", retry_after_s=retry)


def record_attempt(session: Session, username: str, address: str, ok: bool,
                   now: datetime, limit: LoginLimit) -> None:
    """Write one attempt, and drop records older than the window (they count no more)."""
    session.add(LoginAttempt(username=username.lower()[:64], address=address[:64], ok=ok,
                             at=now))
    session.execute(delete(LoginAttempt).where(
        LoginAttempt.at < now - timedelta(seconds=limit.window_s)))
