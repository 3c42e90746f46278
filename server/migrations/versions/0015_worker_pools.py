"""Worker pools per competition (issue 37): pools, their credentials (hashes only), the phases
each serves, the runs handed to pool workers, and workers.pool_id with names unique per pool.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "worker_pools",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("competition_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("created_by", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["competition_id"], ["competitions.id"],
                                name=op.f("fk_worker_pools_competition_id_competitions"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["created_by"], ["users.id"],
                                name=op.f("fk_worker_pools_created_by_users"),
                                ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_worker_pools")),
        sa.UniqueConstraint("competition_id", "name",
                            name=op.f("uq_worker_pools_competition_id")),
    )
    op.create_index(op.f("ix_worker_pools_competition_id"), "worker_pools", ["competition_id"])
    op.create_table(
        "pool_credentials",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("pool_id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=24), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["pool_id"], ["worker_pools.id"],
                                name=op.f("fk_pool_credentials_pool_id_worker_pools"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pool_credentials")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_pool_credentials_token_hash")),
    )
    op.create_index(op.f("ix_pool_credentials_pool_id"), "pool_credentials", ["pool_id"])
    op.create_table(
        "pool_phases",
        sa.Column("phase_id", sa.Integer(), nullable=False),
        sa.Column("pool_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["phase_id"], ["phases.id"],
                                name=op.f("fk_pool_phases_phase_id_phases"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["pool_id"], ["worker_pools.id"],
                                name=op.f("fk_pool_phases_pool_id_worker_pools"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("phase_id", name=op.f("pk_pool_phases")),
    )
    op.create_index(op.f("ix_pool_phases_pool_id"), "pool_phases", ["pool_id"])
    op.create_table(
        "pool_offers",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(length=200), nullable=True),
        sa.Column("offered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("available_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_pool_offers_run_id_runs"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_pool_offers")),
    )
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("pool_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("host", sa.String(length=200), nullable=True))
        batch_op.create_foreign_key(batch_op.f("fk_workers_pool_id_worker_pools"),
                                    "worker_pools", ["pool_id"], ["id"], ondelete="CASCADE")
        batch_op.drop_constraint(batch_op.f("uq_workers_name"), type_="unique")
        batch_op.create_index("uq_workers_shared_name", ["name"], unique=True,
                              postgresql_where=sa.text("pool_id IS NULL"),
                              sqlite_where=sa.text("pool_id IS NULL"))
        batch_op.create_index("uq_workers_pool_name", ["pool_id", "name"], unique=True,
                              postgresql_where=sa.text("pool_id IS NOT NULL"),
                              sqlite_where=sa.text("pool_id IS NOT NULL"))


def downgrade() -> None:
    op.execute("DELETE FROM workers WHERE pool_id IS NOT NULL")
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.drop_index("uq_workers_pool_name")
        batch_op.drop_index("uq_workers_shared_name")
        batch_op.create_unique_constraint(batch_op.f("uq_workers_name"), ["name"])
        batch_op.drop_constraint(batch_op.f("fk_workers_pool_id_worker_pools"),
                                 type_="foreignkey")
        batch_op.drop_column("host")
        batch_op.drop_column("pool_id")
    op.drop_table("pool_offers")
    op.drop_index(op.f("ix_pool_phases_pool_id"), table_name="pool_phases")
    op.drop_table("pool_phases")
    op.drop_index(op.f("ix_pool_credentials_pool_id"), table_name="pool_credentials")
    op.drop_table("pool_credentials")
    op.drop_index(op.f("ix_worker_pools_competition_id"), table_name="worker_pools")
    op.drop_table("worker_pools")
