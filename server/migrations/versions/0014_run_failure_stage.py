"""Where a failed run failed (issue 35.3): the stage the worker's verdict placed it in, read by
the secrecy rule instead of the message's words; NULL for older runs (the rule then falls back
to the message's prefix).

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("failure_stage", sa.String(length=32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("failure_stage")
