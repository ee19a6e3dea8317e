"""team_conversations and member_sessions: conversation state outside the process

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "team_conversations",
        sa.Column("team_id", sa.String(length=64), nullable=False),
        sa.Column("owner", sa.String(length=255), nullable=False),
        sa.Column("context_id", sa.String(length=255), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("team_id", "owner", "context_id"),
    )
    op.create_table(
        "member_sessions",
        sa.Column("agent_id", sa.String(length=64), nullable=False),
        sa.Column("owner", sa.String(length=255), nullable=False),
        sa.Column("context_id", sa.String(length=255), nullable=False),
        sa.Column("remote_context_id", sa.String(length=255), nullable=False),
        sa.Column("waiting_task_id", sa.String(length=255), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("agent_id", "owner", "context_id"),
    )


def downgrade() -> None:
    op.drop_table("member_sessions")
    op.drop_table("team_conversations")
