"""One account per e-mail address, sign-ups counted per address, e-mail verification (issue 33.12).

`users.email_key`: the address normalized (NFKC, stripped, case-folded), unique. Backfilled for
the first account of each address only: later accounts that share an address keep it (and
work as before) with no key, so the upgrade never fails on old data, and no new account can
take an address that is held. `users.signup_address`: the client address a self-made account
signed up from (the per-address sign-up limit counts it). `users.email_verify_pending`: signed
up while the server sends mail, and not yet verified (may not take part until then).

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import unicodedata

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def _email_key(email: str) -> str:
    """As server/services/signup.py `email_key` (copied: a migration must not change later)."""
    return unicodedata.normalize("NFKC", email).strip().casefold()


def upgrade() -> None:
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(sa.Column("email_key", sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column("signup_address", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("email_verify_pending", sa.Boolean(), nullable=False,
                                      server_default=sa.false()))
    conn = op.get_bind()
    seen: set[str] = set()
    rows = conn.execute(sa.text("SELECT id, email FROM users WHERE email IS NOT NULL "
                                "ORDER BY id")).all()
    for user_id, email in rows:
        key = _email_key(email)
        if key and key not in seen:
            seen.add(key)
            conn.execute(sa.text("UPDATE users SET email_key = :key WHERE id = :id"),
                         {"key": key, "id": user_id})
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.create_unique_constraint(batch_op.f("uq_users_email_key"), ["email_key"])
        batch_op.create_index(batch_op.f("ix_users_signup_address"), ["signup_address"])


def downgrade() -> None:
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_users_signup_address"))
        batch_op.drop_constraint(batch_op.f("uq_users_email_key"), type_="unique")
        batch_op.drop_column("email_verify_pending")
        batch_op.drop_column("signup_address")
        batch_op.drop_column("email_key")
