"""turn_checkpoints: where each team turn in flight is, so another replica resumes it

A team turn that calls models for minutes must not be thrown away when its replica dies or is
stopped: the Router writes the turn's position (trail, next hop, the member's own task id) when
each hop starts, and the replica that takes over the task resumes from it (routing/durable.py).

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "turn_checkpoints",
        sa.Column("task_id", sa.String(255), primary_key=True),
        sa.Column("owner", sa.String(255), nullable=False, server_default=""),
        sa.Column("team_id", sa.String(64), nullable=False),
        sa.Column("state", sa.JSON, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_index("turn_checkpoints_updated", "turn_checkpoints", ["updated_at"])


def downgrade() -> None:
    op.drop_index("turn_checkpoints_updated", table_name="turn_checkpoints")
    op.drop_table("turn_checkpoints")
