"""Accounts people make themselves: who may sign up (the platform setting `signup`: `open`,
`invite` with a code, `domains` for allowed email domains, or `off`), and creating the account
with an argon2-hashed password. Sign-up makes participants only; organizers are still made by
an admin. The account, its audit entry and the first web session are one transaction.

Open sign-up is bounded (issue 33.12): one account per e-mail address (`email_key`: NFKC,
stripped, case-folded; a unique column), at most `per_address_per_hour` accounts signed up from
one client address in an hour (429 with when to retry), and, where the server sends mail, the
address is verified by a link before the account may take part (services/email_verification.py).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from server.core.errors import (
    ConflictError,
    ForbiddenError,
    InvalidInputError,
    TooManyAttemptsError,
)
from server.core.security import hash_password, same_secret
from server.models import AuditLog, User
from server.services.names import display_name, name_key
from server.services.reserved_names import check_not_reserved

USERNAME = re.compile(r"^[A-Za-z0-9_.-]{2,64}$")
EMAIL = re.compile(r"^[^@\s\x00-\x1f\x7f]{1,64}@[A-Za-z0-9.-]{1,190}\.[A-Za-z]{2,24}$")
MIN_PASSWORD, MAX_PASSWORD = 8, 256
HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class SignupPolicy:
    """The platform's sign-up setting (from Settings: signup, signup_invite_code, …)."""

    mode: str = "open"
    invite_code: str = ""
    email_domains: tuple[str, ...] = field(default_factory=tuple)
    per_address_per_hour: int = 10  # accounts one client address may sign up in an hour; 0: any
    verify_email: bool = False  # the server sends mail: new accounts verify their address

    def describe(self) -> str:
        """The rule in words, for the sign-up page."""
        return {"open": "Anyone may sign up.",
                "invite": "Sign-up needs the invite code your organizers gave you.",
                "domains": "Sign-up is open to email addresses at "
                           + ", ".join(self.email_domains) + ".",
                "off": "Sign-up is closed on this server: ask an organizer for an account."
                }[self.mode]


def check_password(password: str) -> None:
    """Raise InvalidInputError unless the password is 8 to 256 characters of text."""
    if not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise InvalidInputError(
            f"the password has {len(password)} characters; expected {MIN_PASSWORD} to "
            f"{MAX_PASSWORD} — choose a longer one (a phrase of a few words works well)",
            code="signup.bad_password")
    if not _encodable(password):
        raise InvalidInputError("the password holds a character that is not text (a lone "
                                "UTF-16 surrogate); type it again", code="signup.bad_password")


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def email_key(email: str) -> str:
    """The form of an address that must be unique: NFKC, stripped, case-folded."""
    return unicodedata.normalize("NFKC", email).strip().casefold()


def check_email_free(session: Session, email: str) -> str:
    """The address's `email_key`; InvalidInputError (`signup.bad_email`) unless it is an address,
    ConflictError (`user.email_taken`) when an account has it."""
    if not EMAIL.match(email.strip()):
        raise InvalidInputError(f"{email!r} is not an email address; expected name@example.org",
                                code="signup.bad_email")
    key = email_key(email)
    if session.execute(select(User.id).where(User.email_key == key)).first() is not None:
        raise ConflictError(f"an account with the e-mail address {email!r} exists already; "
                            "log in with it, or use 'Forgot your password?' on the login page",
                            code="user.email_taken")
    return key


def check_signup_rate(session: Session, policy: SignupPolicy, address: str,
                      now: datetime) -> None:
    """Raise TooManyAttemptsError when `address` signed up `per_address_per_hour` accounts
    within the last hour (saying when the next one may be made)."""
    if not policy.per_address_per_hour or not address:
        return
    count, oldest = session.execute(select(func.count(User.id), func.min(User.created_at)).where(
        User.signup_address == address[:64], User.created_at > now - HOUR)).one()
    if count >= policy.per_address_per_hour:
        retry = max(1, int((oldest + HOUR - now).total_seconds()) + 1)
        raise TooManyAttemptsError(
            f"{count} accounts were signed up from your address in the last hour, the most "
            f"this server allows; wait {retry} s to make another, or ask an organizer",
            retry_after_s=retry)


def check_signup(policy: SignupPolicy, email: str, invite_code: str) -> None:
    """Raise ForbiddenError unless the policy lets this email (and code) sign up."""
    if policy.mode == "off":
        raise ForbiddenError(policy.describe(), code="signup.off")
    if policy.mode == "invite" and not (
            policy.invite_code and same_secret(invite_code.strip(), policy.invite_code)):
        raise ForbiddenError("the invite code is missing or wrong; copy it from the "
                             "invitation your organizers sent", code="signup.bad_invite")
    domain = email.rpartition("@")[2].lower()
    if policy.mode == "domains" and domain not in {d.lower() for d in policy.email_domains}:
        raise ForbiddenError(f"email addresses at {domain!r} may not sign up here; "
                             f"{policy.describe()} Use such an address, or ask an organizer",
                             code="signup.domain")


def sign_up(session: Session, policy: SignupPolicy, *, username: str, email: str,
            password: str, invite_code: str, now: datetime, address: str = "") -> User:
    """Create a participant account from client `address`; raises InvalidInputError,
    ForbiddenError, ConflictError, TooManyAttemptsError.

    The caller commits (with the first session token, when the web form signed them up).
    """
    username, email = display_name(username), email.strip()  # NFKC: "ａｄａ" is "ada"
    check_signup(policy, email, invite_code)
    if not USERNAME.match(username):
        raise InvalidInputError(f"the username {username!r} is not 2 to 64 letters, digits or "
                                "'_.-'; choose one like 'ada_l'", code="signup.bad_username")
    check_not_reserved(username)
    if not EMAIL.match(email):
        raise InvalidInputError(f"{email!r} is not an email address; expected name@example.org",
                                code="signup.bad_email")
    check_password(password)
    taken = session.execute(select(User.username).where(
        User.name_key == name_key(username))).scalar()
    if taken is not None:
        alike = "" if taken == username else f" (as {taken!r}, which looks the same)"
        raise ConflictError(f"the username {username!r} is taken{alike}; choose another",
                            code="user.exists")
    key = check_email_free(session, email)
    check_signup_rate(session, policy, address, now)
    user = User(username=username, email=email, role="participant", email_key=key,
                signup_address=address[:64] or None, email_verify_pending=policy.verify_email,
                password_hash=hash_password(password), created_at=now)
    session.add(user)
    try:
        session.flush()
    except IntegrityError as exc:  # the same name or address, signed up at the same moment
        raise ConflictError(f"the username {username!r} or the address {email!r} was taken "
                            "a moment ago; choose another", code="user.exists") from exc
    session.add(AuditLog(actor_id=user.id, action="user.signup", target=f"user:{user.id}",
                         details={"mode": policy.mode}, at=now))
    return user
