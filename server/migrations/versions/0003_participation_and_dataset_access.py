"""Participation and dataset access: a competition is open to every participant or needs the
organizer's approval (`competitions.participation`, `competition_members` with each request and
decision), and an organizer may use a registered dataset only if they registered it themselves
(`dataset_grants`, one row per organizer who uploaded that content) or an admin did.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("competitions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("participation", sa.String(length=16), nullable=False,
                                      server_default="open"))
    op.create_table(
        "competition_members",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("competition_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("decided_by", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["competition_id"], ["competitions.id"],
                                name=op.f("fk_competition_members_competition_id_competitions"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"],
                                name=op.f("fk_competition_members_user_id_users"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["decided_by"], ["users.id"],
                                name=op.f("fk_competition_members_decided_by_users"),
                                ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_competition_members")),
        sa.UniqueConstraint("competition_id", "user_id",
                            name=op.f("uq_competition_members_competition_id")),
    )
    op.create_table(
        "dataset_grants",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("granted_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"],
                                name=op.f("fk_dataset_grants_dataset_id_datasets"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"],
                                name=op.f("fk_dataset_grants_user_id_users"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dataset_grants")),
        sa.UniqueConstraint("dataset_id", "user_id", name=op.f("uq_dataset_grants_dataset_id")),
    )
    # Existing datasets stay usable by whoever registered them.
    op.execute("INSERT INTO dataset_grants (dataset_id, user_id, granted_at) "
               "SELECT id, created_by, created_at FROM datasets WHERE created_by IS NOT NULL")


def downgrade() -> None:
    op.drop_table("dataset_grants")
    op.drop_table("competition_members")
    with op.batch_alter_table("competitions", schema=None) as batch_op:
        batch_op.drop_column("participation")
