"""Writes that end by handing out a new API token (shown once), each one committed unit of work
(docs/internals.md, "Commits"): a password login, an account made by staff, a self sign-up.

They compose the services that check and write (passwords, users, signup) and commit once at
their end, so the account and its first token are stored together or not at all; the route only
calls them, then does what follows a commit (the sign-up's verification mail).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from server.models import User
from server.services.login_limit import LoginLimit
from server.services.passwords import password_login
from server.services.signup import SignupPolicy, sign_up
from server.services.users import create_user, issue_token


def login_token(session: Session, username: str, password: str, address: str, now: datetime,
                limit: LoginLimit) -> tuple[User, str]:
    """A password login's new API token ('password-login'). The attempt is recorded (and
    committed) either way by `password_login`, which raises on a refused login."""
    user = password_login(session, username, password, address, now, limit)
    token = issue_token(session, user, name="password-login", now=now)
    session.commit()
    return user, token


def create_account(session: Session, actor: User, *, username: str, role: str,
                   password: str | None, email: str | None, with_token: bool,
                   now: datetime) -> tuple[User, str | None]:
    """An account made by `actor` (users.create_user checks who may make which role) and, when
    asked, its first API token."""
    user = create_user(session, username=username, role=role, password=password, email=email,
                       actor=actor)
    token = issue_token(session, user, now=now) if with_token else None
    session.commit()
    return user, token


def sign_up_with_token(session: Session, policy: SignupPolicy, *, username: str, email: str,
                       password: str, invite_code: str, now: datetime,
                       address: str) -> tuple[User, str]:
    """A participant's own account (signup.sign_up decides whether it may be made) and its
    first API token ('signup')."""
    user = sign_up(session, policy, username=username, email=email, password=password,
                   invite_code=invite_code, now=now, address=address)
    token = issue_token(session, user, name="signup", now=now)
    session.commit()
    return user, token
