"""What a running run is doing, as its worker last reported in a heartbeat (issue 14): the step
(meta-training or meta-test), test tasks done of total, and the last lines of its log. Shown on
the submission page and by `arena submit` while it runs; null before the first report.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("progress", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("progress")
