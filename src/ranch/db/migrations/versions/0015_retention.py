"""retention: the leases replicas take turns with, and an index for each prune's read

The pruner (ranch/retention) finds what is past its lifetime on an index, a batch at a time, so a
round costs the rows it deletes, not the rows kept: finished tasks by (state, status time), events
and messages by their time, conversations and members' sessions by their last write, keys by when
they were revoked or expired (partial: most keys are neither). A message's deliveries are found by
(status, seq): whether one is still to handle, and the handled ones to go with it (the take-over
reads its pending deliveries in that order too). `leases` holds whose turn a round is, so one
replica at a time prunes; `pruned_events` how far each room's events were pruned (what a WebSocket
cursor may resume from).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

COUNTER = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
REVOKED = sa.text("revoked_at IS NOT NULL")
EXPIRING = sa.text("expires_at IS NOT NULL")
INDEXES = (
    ("ranch_tasks_state_updated", "ranch_tasks", ["state", "updated_ns"]),
    ("events_created", "events", ["created_at"]),
    ("messages_created", "messages", ["created_at"]),
    ("deliveries_status_message", "deliveries", ["status", "message_seq"]),
    ("team_conversations_updated", "team_conversations", ["updated_at"]),
    ("member_sessions_updated", "member_sessions", ["updated_at"]),
)


def upgrade() -> None:
    op.create_table(
        "leases",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("holder", sa.String(64), nullable=False),
        sa.Column("until", sa.Float(), nullable=False),
    )
    op.create_table(
        "pruned_events",
        sa.Column("room_id", sa.String(64), sa.ForeignKey("rooms.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("through", COUNTER, nullable=False),
    )
    for name, table, columns in INDEXES:
        op.create_index(name, table, columns)
    op.create_index(
        "api_keys_revoked_at", "api_keys", ["revoked_at"], sqlite_where=REVOKED, postgresql_where=REVOKED
    )
    op.create_index(
        "api_keys_expires_at", "api_keys", ["expires_at"], sqlite_where=EXPIRING, postgresql_where=EXPIRING
    )


def downgrade() -> None:
    op.drop_index("api_keys_expires_at", table_name="api_keys")
    op.drop_index("api_keys_revoked_at", table_name="api_keys")
    for name, table, _columns in reversed(INDEXES):
        op.drop_index(name, table_name=table)
    op.drop_table("pruned_events")
    op.drop_table("leases")
