"""Competition operations: bundles (pages, leagues), final phases carried from another phase,
leaderboard settings, selected/baseline/carried submissions, cancel and re-run marks on runs,
and the workers table.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_FALSE = sa.false()


def upgrade() -> None:
    with op.batch_alter_table("competitions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("pages", sa.JSON(), nullable=False, server_default="[]"))
        batch_op.add_column(sa.Column("leagues", sa.JSON(), nullable=False, server_default="[]"))
        batch_op.add_column(sa.Column("bundle", sa.Text(), nullable=True))
    with op.batch_alter_table("phases", schema=None) as batch_op:
        batch_op.add_column(sa.Column("leaderboard", sa.JSON(), nullable=False,
                                      server_default="{}"))
        batch_op.add_column(sa.Column("carry_from_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_foreign_key(batch_op.f("fk_phases_carry_from_id_phases"), "phases",
                                    ["carry_from_id"], ["id"], ondelete="SET NULL")
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("league", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("is_selected", sa.Boolean(), nullable=False,
                                      server_default=_FALSE))
        batch_op.add_column(sa.Column("is_baseline", sa.Boolean(), nullable=False,
                                      server_default=_FALSE))
        batch_op.add_column(sa.Column("charged", sa.Boolean(), nullable=False,
                                      server_default=sa.true()))
        batch_op.add_column(sa.Column("carried_from_id", sa.Integer(), nullable=True))
        batch_op.create_foreign_key(batch_op.f("fk_submissions_carried_from_id_submissions"),
                                    "submissions", ["carried_from_id"], ["id"],
                                    ondelete="SET NULL")
        batch_op.create_unique_constraint("uq_submissions_phase_carried",
                                          ["phase_id", "carried_from_id"])
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cancel_requested_at", sa.DateTime(timezone=True),
                                      nullable=True))
        batch_op.add_column(sa.Column("superseded_at", sa.DateTime(timezone=True),
                                      nullable=True))
    op.create_table(
        "workers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("first_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("current_run_id", sa.Integer(), nullable=True),
        sa.Column("stage", sa.String(length=16), nullable=True),
        sa.Column("gpus", sa.JSON(), nullable=False),
        sa.Column("runs_claimed", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["current_run_id"], ["runs.id"],
                                name=op.f("fk_workers_current_run_id_runs"), ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workers")),
        sa.UniqueConstraint("name", name=op.f("uq_workers_name")),
    )
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_workers_last_seen_at"), ["last_seen_at"],
                              unique=False)


def downgrade() -> None:
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_workers_last_seen_at"))
    op.drop_table("workers")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("superseded_at")
        batch_op.drop_column("cancel_requested_at")
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.drop_constraint("uq_submissions_phase_carried", type_="unique")
        batch_op.drop_constraint(batch_op.f("fk_submissions_carried_from_id_submissions"),
                                 type_="foreignkey")
        for column in ("carried_from_id", "charged", "is_baseline", "is_selected", "league"):
            batch_op.drop_column(column)
    with op.batch_alter_table("phases", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_phases_carry_from_id_phases"),
                                 type_="foreignkey")
        for column in ("closed_at", "carry_from_id", "leaderboard"):
            batch_op.drop_column(column)
    with op.batch_alter_table("competitions", schema=None) as batch_op:
        for column in ("bundle", "leagues", "pages"):
            batch_op.drop_column(column)
