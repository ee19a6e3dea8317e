"""deliveries.runner: the replica that will handle (or is handling) a room delivery

Before it, every replica's start closed every running delivery and queued every pending one
again, those of replicas still alive included. Now a start, and every take-over round, touches
only the deliveries of replicas that are gone.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.add_column(sa.Column("runner", sa.String(length=64), nullable=True))
        batch_op.create_index("deliveries_status_runner", ["status", "runner"])
    # before this revision a delivery belonged to whichever process started next: left unnamed,
    # the first replica to look takes it


def downgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_index("deliveries_status_runner")
        batch_op.drop_column("runner")
