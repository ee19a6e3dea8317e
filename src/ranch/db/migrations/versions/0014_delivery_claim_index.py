"""deliveries: an index for the claim's "does anything go before it?"

A delivery is claimed once nothing of the same agent in the same room is running or waits with an
earlier message. With (room, agent, status, message) both lookups read only the live deliveries, not
the room's whole past.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "deliveries_room_agent_status", "deliveries", ["room_id", "agent_id", "status", "message_seq"]
    )


def downgrade() -> None:
    op.drop_index("deliveries_room_agent_status", table_name="deliveries")
