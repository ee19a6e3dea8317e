"""push_outbox: push notifications on their way, held by the replica sending them

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "push_outbox",
        sa.Column(
            "seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("task_id", sa.String(length=255), nullable=False),
        sa.Column("runner", sa.String(length=255), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("seq"),
    )
    op.create_index("push_outbox_runner", "push_outbox", ["runner"])


def downgrade() -> None:
    op.drop_index("push_outbox_runner", table_name="push_outbox")
    op.drop_table("push_outbox")
