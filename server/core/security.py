"""Secrets: API tokens, passwords, per-run worker tokens and CSRF tokens.

Tokens are random 32-byte urlsafe strings shown once; the database keeps only their sha256 hex,
so a database leak does not hand out working tokens (tokens have full entropy, so a fast hash is
enough). Passwords, which people choose, are hashed with argon2.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_hasher = PasswordHasher()


def new_token() -> str:
    """A fresh random token (32 bytes, urlsafe base64)."""
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The sha256 hex digest stored in place of a token."""
    return hashlib.sha256(token.encode()).hexdigest()


def token_matches(token: str, stored_hash: str | None) -> bool:
    """Constant-time comparison of a presented token with a stored hash."""
    return stored_hash is not None and hmac.compare_digest(hash_token(token), stored_hash)


def same_secret(sent: object, expected: str) -> bool:
    """Constant-time equality of a presented secret (a form field, a header) with the expected
    one. Any text compares, non-ASCII too (`hmac.compare_digest` raises TypeError on non-ASCII
    str, which was a 500): both sides are compared as UTF-8 bytes; a non-str never matches."""
    if not isinstance(sent, str) or not sent or not expected:
        return False
    return hmac.compare_digest(sent.encode("utf-8", "surrogatepass"),
                               expected.encode("utf-8", "surrogatepass"))


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(password: str, stored_hash: str | None) -> bool:
    """True when `password` matches; never raises on a malformed or missing hash."""
    if not stored_hash:
        return False
    try:
        return _hasher.verify(stored_hash, password)
    except (VerificationError, InvalidHashError, UnicodeEncodeError):  # a lone surrogate
        return False


def csrf_token(secret_key: str, session_token: str) -> str:
    """The CSRF token bound to one cookie session (HMAC, so no server-side state)."""
    return hmac.new(secret_key.encode(), f"csrf:{session_token}".encode(), "sha256").hexdigest()
