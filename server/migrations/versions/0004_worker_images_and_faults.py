"""Workers report the sandbox images their engine holds (`workers.images`), so that a phase
naming an image no worker has is refused when it is created, and the details of the last
platform fault each released a run for (`workers.last_fault`, `last_fault_at`), for operators.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("images", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("last_fault", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("last_fault_at", sa.DateTime(timezone=True),
                                      nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.drop_column("last_fault_at")
        batch_op.drop_column("last_fault")
        batch_op.drop_column("images")
