"""Accounts people make themselves (issue 23): failed-login records for the rate limit and
one-time password-reset links (hashed); a competition's terms and who accepted them.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "login_attempts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("username", sa.String(length=64), nullable=False),
        sa.Column("address", sa.String(length=64), nullable=False),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_login_attempts")),
    )
    for column in ("username", "address", "at"):
        op.create_index(op.f(f"ix_login_attempts_{column}"), "login_attempts", [column])
    op.create_table(
        "password_resets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_by", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"],
                                name=op.f("fk_password_resets_user_id_users"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["created_by"], ["users.id"],
                                name=op.f("fk_password_resets_created_by_users"),
                                ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_password_resets")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_password_resets_token_hash")),
    )
    op.create_index(op.f("ix_password_resets_user_id"), "password_resets", ["user_id"])
    with op.batch_alter_table("competitions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("terms", sa.Text(), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("tabs", sa.JSON(), nullable=False, server_default="{}"))
        batch_op.add_column(sa.Column("teams_allowed", sa.Boolean(), nullable=False,
                                      server_default=sa.false()))
        batch_op.add_column(sa.Column("team_max_size", sa.Integer(), nullable=False,
                                      server_default="1"))
        batch_op.add_column(sa.Column("teams_lock_at", sa.DateTime(timezone=True),
                                      nullable=True))
    with op.batch_alter_table("phases", schema=None) as batch_op:
        batch_op.add_column(sa.Column("factsheet", sa.JSON(), nullable=False,
                                      server_default="[]"))
    with op.batch_alter_table("competition_members", schema=None) as batch_op:
        batch_op.add_column(sa.Column("accepted_terms_at", sa.DateTime(timezone=True),
                                      nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("phases", schema=None) as batch_op:
        batch_op.drop_column("factsheet")
    with op.batch_alter_table("competition_members", schema=None) as batch_op:
        batch_op.drop_column("accepted_terms_at")
    with op.batch_alter_table("competitions", schema=None) as batch_op:
        for column in ("teams_lock_at", "team_max_size", "teams_allowed", "tabs", "terms"):
            batch_op.drop_column(column)
    op.drop_table("password_resets")
    op.drop_table("login_attempts")
