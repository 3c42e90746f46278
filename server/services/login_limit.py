"""The password-login rate limit: slow a guesser down without locking the owner out.

Every attempt is keyed by `login_key(username)`, the very key the login looks the account up
by (services/names.py: NFKC, whitespace collapsed, case-folded, TR39 skeleton), so " vic", "vic\\t",
"VIC", "ｖｉｃ" and "vіc" (Cyrillic і) are one account to the limit as to the login. Three rules,
checked before the password is (so a refused guess costs the attacker time, not us a hash):

1. **Per account and address, exponential backoff.** After `FREE_TRIES` failures of one account
   from one address, each further failure doubles the wait before the next try (1 s, 2 s,
   4 s, ... up to the window). A success from that address clears its count. The owner's
   typos cost them seconds; a guesser on one address gets about a dozen tries per window.
2. **Per address, across accounts:** `ADDRESS_FACTOR` x `attempts` failures in the window
   (one address spraying many accounts). Loose, so a shared NAT is not shut by one person.
3. **Per account, across addresses:** `attempts` failures in the window refuse further tries
   from addresses that have not logged in to this account lately (`TRUSTED_FOR`): a guesser
   spread over many addresses is stopped, while the owner, from an address they logged in
   from before, is not locked out by them (rule 1 still applies to that address alone).

Attempts are rows (`LoginAttempt`), so every server process and restart sees one count.
Failures are kept for the window; the latest success per account and address for
`TRUSTED_FOR` (it is what makes an address trusted).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from server.core.errors import TooManyAttemptsError
from server.models import LoginAttempt
from server.services.names import name_key

FREE_TRIES = 3
BASE_DELAY_S = 1
ADDRESS_FACTOR = 5
TRUSTED_FOR = timedelta(days=30)
_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


@dataclass(frozen=True)
class LoginLimit:
    """At most `attempts` failures per account (from untrusted addresses) per `window_s`."""

    attempts: int = 10
    window_s: int = 900


def login_key(username: str) -> str:
    """The one form of a typed username that login finds the account by (`User.name_key`,
    services/names.py) and its limit counts: control and invisible characters dropped first
    (no honest username has them; a NUL would not even store in Postgres)."""
    text = "".join(c for c in username
                   if unicodedata.category(c) not in _INVISIBLE or c in " \t\n\r")
    return name_key(text) if text.strip() else ""


def _refuse(what: str, retry_s: float, detail: str) -> TooManyAttemptsError:
    retry = max(1, int(retry_s) + 1)
    return TooManyAttemptsError(
        f"too many failed logins for {what} ({detail}); wait {retry} s and try again, or use "
        "'Forgot your password?' (or ask an admin for a password-reset link)",
        retry_after_s=retry)


def check_login_allowed(session: Session, key: str, address: str, now: datetime,
                        limit: LoginLimit) -> None:
    """Raise TooManyAttemptsError when `key` (a `login_key`) may not be tried from `address`
    now (the three rules of the module docstring)."""
    key, address = key[:64], address[:64]  # the columns' width
    since = now - timedelta(seconds=limit.window_s)
    failed = select(func.count(LoginAttempt.id), func.min(LoginAttempt.at),
                    func.max(LoginAttempt.at)).where(LoginAttempt.ok.is_(False),
                                                     LoginAttempt.at > since)
    last_ok = session.execute(select(func.max(LoginAttempt.at)).where(
        LoginAttempt.ok.is_(True), LoginAttempt.username == key,
        LoginAttempt.address == address)).scalar()
    pair_since = max(since, last_ok) if last_ok is not None else since
    count, _, latest = session.execute(failed.where(
        LoginAttempt.username == key, LoginAttempt.address == address,
        LoginAttempt.at > pair_since)).one()
    if count >= FREE_TRIES:
        delay = min(limit.window_s, BASE_DELAY_S * 2 ** (count - FREE_TRIES))
        wait = (latest + timedelta(seconds=delay) - now).total_seconds()
        if wait > 0:
            raise _refuse("this account from your address", wait,
                          f"{count} in a row; each one more doubles the wait")
    count, oldest, _ = session.execute(failed.where(LoginAttempt.address == address)).one()
    if count >= limit.attempts * ADDRESS_FACTOR:
        raise _refuse("your address", (oldest - since).total_seconds(),
                      f"{count} in the last {limit.window_s // 60} min")
    trusted = last_ok is not None and last_ok > now - TRUSTED_FOR
    count, oldest, _ = session.execute(failed.where(LoginAttempt.username == key)).one()
    if count >= limit.attempts and not trusted:
        raise _refuse("this account", (oldest - since).total_seconds(),
                      f"{count} in the last {limit.window_s // 60} min, from addresses it has "
                      "not logged in from lately; from one it has, you can still log in")


def record_attempt(session: Session, key: str, address: str, ok: bool,
                   now: datetime, limit: LoginLimit) -> None:
    """Write one attempt, and drop what counts no more: failures older than the window, and
    successes older than `TRUSTED_FOR` or older than this account's latest from this address."""
    key, address = key[:64], address[:64]
    if ok:
        session.execute(delete(LoginAttempt).where(
            LoginAttempt.ok.is_(True), LoginAttempt.username == key,
            LoginAttempt.address == address))
    session.add(LoginAttempt(username=key, address=address, ok=ok, at=now))
    session.execute(delete(LoginAttempt).where(
        LoginAttempt.ok.is_(False), LoginAttempt.at < now - timedelta(seconds=limit.window_s)))
    session.execute(delete(LoginAttempt).where(
        LoginAttempt.ok.is_(True), LoginAttempt.at < now - TRUSTED_FOR))
