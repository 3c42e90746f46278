"""Names that cannot impersonate, and teams that cannot refill a quota (issue 33).

`users.name_key` (unique) and `teams.name_key` (unique per competition): the TR39 skeleton of
the name (server/services/names.py), backfilled; where two existing names share a key, the
later row's key gets `#<id>` so the upgrade never fails on old data (both keep working, no new
lookalike can join them). `teams.dissolved_at`: the last member left. `team_stints`: each
member's time in a team, backfilled as an open stint for every current member.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from server.services.names import name_key

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def _backfill(table: str, name_column: str, scope: str | None) -> None:
    conn = op.get_bind()
    scope_sql = f", {scope}" if scope else ""
    rows = conn.execute(sa.text(f"SELECT id, {name_column}{scope_sql} FROM {table} ORDER BY id"))
    seen: set[tuple[object, str]] = set()
    for row in rows.all():
        key = name_key(row[1])
        group = row[2] if scope else None
        if (group, key) in seen:
            key = f"{key}#{row[0]}"
        seen.add((group, key))
        conn.execute(sa.text(f"UPDATE {table} SET name_key = :key WHERE id = :id"),
                     {"key": key, "id": row[0]})


def upgrade() -> None:
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(sa.Column("name_key", sa.String(length=255), nullable=True))
    _backfill("users", "username", None)
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.alter_column("name_key", existing_type=sa.String(length=255), nullable=False)
        batch_op.create_unique_constraint(batch_op.f("uq_users_name_key"), ["name_key"])

    with op.batch_alter_table("teams", schema=None) as batch_op:
        batch_op.add_column(sa.Column("name_key", sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column("dissolved_at", sa.DateTime(timezone=True),
                                      nullable=True))
    _backfill("teams", "name", "competition_id")
    with op.batch_alter_table("teams", schema=None) as batch_op:
        batch_op.alter_column("name_key", existing_type=sa.String(length=255), nullable=False)
        batch_op.create_unique_constraint(batch_op.f("uq_teams_name_key"),
                                          ["name_key", "competition_id"])

    op.create_table(
        "team_stints",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("competition_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("joined_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("left_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["team_id"], ["teams.id"],
                                name=op.f("fk_team_stints_team_id_teams"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["competition_id"], ["competitions.id"],
                                name=op.f("fk_team_stints_competition_id_competitions"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"],
                                name=op.f("fk_team_stints_user_id_users"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_team_stints")),
    )
    op.create_index(op.f("ix_team_stints_team_id"), "team_stints", ["team_id"])
    op.create_index(op.f("ix_team_stints_user_id"), "team_stints", ["user_id"])
    op.execute("INSERT INTO team_stints (team_id, competition_id, user_id, joined_at) "
               "SELECT team_id, competition_id, user_id, joined_at FROM team_members")


def downgrade() -> None:
    op.drop_index(op.f("ix_team_stints_user_id"), table_name="team_stints")
    op.drop_index(op.f("ix_team_stints_team_id"), table_name="team_stints")
    op.drop_table("team_stints")
    with op.batch_alter_table("teams", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_teams_name_key"), type_="unique")
        batch_op.drop_column("dissolved_at")
        batch_op.drop_column("name_key")
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_users_name_key"), type_="unique")
        batch_op.drop_column("name_key")
