"""deliveries.trace: the W3C traceparent of the request that posted the message

With tracing on, the turn a delivery starts (on whichever replica, however much later) joins
the trace of the message that woke it. Null when tracing was off.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.add_column(sa.Column("trace", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_column("trace")
