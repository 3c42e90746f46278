"""workers.host_lock: whether the worker's last claim or pool job request said it runs a run
marked `exclusive_host` alone on its host (worker/host_lock.py). A worker that does not (one
older than the host lock) is given no run of a phase with secret test data. NULL: not heard
from since.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("workers", sa.Column("host_lock", sa.Boolean(), nullable=True))


def downgrade() -> None:
    op.drop_column("workers", "host_lock")
