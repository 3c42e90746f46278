"""What meta-train alone wrote, kept apart from the run's whole log (issue 35.3): the worker's
finish body carries it as its own field, and the secrecy rule serves it to the owner of a
secret-data run instead of cutting the log's text. NULL for older runs: their log is withheld
whole from such an owner.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("meta_train_log", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("meta_train_log")
