"""A worker's reported unhealthy state (its disk or engine fails, so it claims nothing), shown
on the workers page (issue 21).

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("unhealthy", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("unhealthy_at", sa.DateTime(timezone=True),
                                      nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.drop_column("unhealthy_at")
        batch_op.drop_column("unhealthy")
