"""An organizer may disqualify a submission (issue 14): it leaves the leaderboard and is never
carried into a final, its owner sees why, and the decision can be undone — both are audited.
`disqualified_at` is when (null: in good standing), `disqualified_reason` the words shown.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("disqualified_at", sa.DateTime(timezone=True),
                                      nullable=True))
        batch_op.add_column(sa.Column("disqualified_reason", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.drop_column("disqualified_reason")
        batch_op.drop_column("disqualified_at")
