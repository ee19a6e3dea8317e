"""events: each room's own cursor, counted on its row

A room's events are numbered by the room (`events.cursor`, unique per room), and `rooms.last_event`
holds its newest, so writes to different rooms no longer share one order. An event written before
this revision keeps its global number as its cursor: a client's saved cursor stays valid, and a
room's later events count on from its newest.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

COUNTER = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("rooms", schema=None) as batch_op:
        batch_op.add_column(sa.Column("last_event", COUNTER, nullable=False, server_default="0"))
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cursor", COUNTER, nullable=True))
    op.execute("UPDATE events SET cursor = seq")
    newest = "SELECT MAX(seq) FROM events WHERE events.room_id = rooms.id"
    op.execute(f"UPDATE rooms SET last_event = COALESCE(({newest}), 0)")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.alter_column("cursor", existing_type=COUNTER, nullable=False)
        batch_op.drop_index("events_room_seq")
        batch_op.create_index("events_room_cursor", ["room_id", "cursor"], unique=True)


def downgrade() -> None:
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index("events_room_cursor")
        batch_op.create_index("events_room_seq", ["room_id", "seq"], unique=False)
        batch_op.drop_column("cursor")
    with op.batch_alter_table("rooms", schema=None) as batch_op:
        batch_op.drop_column("last_event")
