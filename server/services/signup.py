"""Accounts people make themselves: who may sign up (the platform setting `signup`: `open`,
`invite` with a code, `domains` for allowed email domains, or `off`), and creating the account
with an argon2-hashed password. Sign-up makes participants only; organizers are still made by
an admin. The account, its audit entry and the first web session are one transaction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core.errors import ConflictError, ForbiddenError, InvalidInputError
from server.core.security import hash_password, same_secret
from server.models import AuditLog, User
from server.services.names import display_name, name_key
from server.services.reserved_names import check_not_reserved

USERNAME = re.compile(r"^[A-Za-z0-9_.-]{2,64}$")
EMAIL = re.compile(r"^[^@\s]{1,64}@[A-Za-z0-9.-]{1,190}\.[A-Za-z]{2,24}$")
MIN_PASSWORD, MAX_PASSWORD = 8, 256


@dataclass(frozen=True)
class SignupPolicy:
    """The platform's sign-up setting (from Settings: signup, signup_invite_code, …)."""

    mode: str = "open"
    invite_code: str = ""
    email_domains: tuple[str, ...] = field(default_factory=tuple)

    def describe(self) -> str:
        """The rule in words, for the sign-up page."""
        return {"open": "Anyone may sign up.",
                "invite": "Sign-up needs the invite code your organizers gave you.",
                "domains": "Sign-up is open to email addresses at "
                           + ", ".join(self.email_domains) + ".",
                "off": "Sign-up is closed on this server: ask an organizer for an account."
                }[self.mode]


def check_password(password: str) -> None:
    """Raise InvalidInputError unless the password is 8 to 256 characters."""
    if not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise InvalidInputError(
            f"the password has {len(password)} characters; expected {MIN_PASSWORD} to "
            f"{MAX_PASSWORD} — choose a longer one (a phrase of a few words works well)",
            code="signup.bad_password")


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
            password: str, invite_code: str, now: datetime) -> User:
    """Create a participant account; raises InvalidInputError, ForbiddenError, ConflictError.

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
    user = User(username=username, email=email, role="participant",
                password_hash=hash_password(password), created_at=now)
    session.add(user)
    session.flush()
    session.add(AuditLog(actor_id=user.id, action="user.signup", target=f"user:{user.id}",
                         details={"mode": policy.mode}, at=now))
    return user
