"""workers.task_isolation (issue 34): what the worker's start-up probe found, sent with its
claims, heartbeats and pool job requests: `own` (test tasks get their own namespaces on its
host) or `shared` (the host refuses them: AppArmor, no user namespaces; every run falls back to
the shared path). NULL: not reported (an older worker, or its probe has not ended or failed).

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("workers", sa.Column("task_isolation", sa.String(length=16), nullable=True))


def downgrade() -> None:
    op.drop_column("workers", "task_isolation")
