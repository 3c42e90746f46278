"""Per-task worst-class accuracy (FewSTAB's wAcc) beside the score, so a FewSTAB board's rank
ranges, tied groups and comparisons are statistics of the wAcc it ranks by (issue 22). Null for
tasks stored before it.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("task_results", schema=None) as batch_op:
        batch_op.add_column(sa.Column("worst_class_accuracy", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("task_results", schema=None) as batch_op:
        batch_op.drop_column("worst_class_accuracy")
