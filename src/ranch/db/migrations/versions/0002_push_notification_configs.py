"""push notification configs

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # servers of this release before the migration created the table themselves; keep theirs
    if sa.inspect(op.get_bind()).has_table("ranch_push_configs"):
        return
    op.create_table(
        "ranch_push_configs",
        sa.Column("task_id", sa.String(length=255), nullable=False),
        sa.Column("id", sa.String(length=255), nullable=False),
        sa.Column("owner", sa.String(length=255), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("task_id", "id"),
    )


def downgrade() -> None:
    op.drop_table("ranch_push_configs")
