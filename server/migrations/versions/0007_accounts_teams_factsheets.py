"""Accounts people make themselves (issue 23): failed-login records for the rate limit and
one-time password-reset links (hashed); a competition's terms and who accepted them, its
onboarding tabs and team rules; teams and their members (one team per person per competition);
a submission's team and method; a phase's fact-sheet questions and the answers.

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
    _teams_and_answers()
    with op.batch_alter_table("competition_members", schema=None) as batch_op:
        batch_op.add_column(sa.Column("accepted_terms_at", sa.DateTime(timezone=True),
                                      nullable=True))


def _teams_and_answers() -> None:
    op.create_table(
        "teams",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("competition_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("captain_id", sa.Integer(), nullable=True),
        sa.Column("invite_code", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["competition_id"], ["competitions.id"],
                                name=op.f("fk_teams_competition_id_competitions"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["captain_id"], ["users.id"],
                                name=op.f("fk_teams_captain_id_users"), ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_teams")),
        sa.UniqueConstraint("competition_id", "name", name=op.f("uq_teams_competition_id")),
        sa.UniqueConstraint("invite_code", name=op.f("uq_teams_invite_code")),
    )
    op.create_index(op.f("ix_teams_competition_id"), "teams", ["competition_id"])
    op.create_table(
        "team_members",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("competition_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("joined_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["team_id"], ["teams.id"],
                                name=op.f("fk_team_members_team_id_teams"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["competition_id"], ["competitions.id"],
                                name=op.f("fk_team_members_competition_id_competitions"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"],
                                name=op.f("fk_team_members_user_id_users"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_team_members")),
        sa.UniqueConstraint("competition_id", "user_id",
                            name=op.f("uq_team_members_competition_id")),
    )
    op.create_index(op.f("ix_team_members_team_id"), "team_members", ["team_id"])
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("team_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("method_name", sa.String(length=100), nullable=False,
                                      server_default=""))
        batch_op.add_column(sa.Column("method_description", sa.Text(), nullable=False,
                                      server_default=""))
        batch_op.add_column(sa.Column("code_url", sa.String(length=500), nullable=True))
        batch_op.create_index(batch_op.f("ix_submissions_team_id"), ["team_id"])
        batch_op.create_foreign_key(batch_op.f("fk_submissions_team_id_teams"), "teams",
                                    ["team_id"], ["id"], ondelete="SET NULL")
    op.create_table(
        "factsheet_answers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("phase_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("answers", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["phase_id"], ["phases.id"],
                                name=op.f("fk_factsheet_answers_phase_id_phases"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"],
                                name=op.f("fk_factsheet_answers_user_id_users"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_factsheet_answers")),
        sa.UniqueConstraint("phase_id", "user_id", name=op.f("uq_factsheet_answers_phase_id")),
    )
    op.create_index(op.f("ix_factsheet_answers_phase_id"), "factsheet_answers", ["phase_id"])


def downgrade() -> None:
    op.drop_table("factsheet_answers")
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_submissions_team_id_teams"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_submissions_team_id"))
        for column in ("code_url", "method_description", "method_name", "team_id"):
            batch_op.drop_column(column)
    op.drop_table("team_members")
    op.drop_table("teams")
    with op.batch_alter_table("phases", schema=None) as batch_op:
        batch_op.drop_column("factsheet")
    with op.batch_alter_table("competition_members", schema=None) as batch_op:
        batch_op.drop_column("accepted_terms_at")
    with op.batch_alter_table("competitions", schema=None) as batch_op:
        for column in ("teams_lock_at", "team_max_size", "teams_allowed", "tabs", "terms"):
            batch_op.drop_column(column)
    op.drop_table("password_resets")
    op.drop_table("login_attempts")
