"""ranch_tasks: an index for each ListTasks filter, and one of the tasks a replica drives

ListTasks pages by (status timestamp, id) descending on an index: by owner (0001), by owner and
context (this one replaces 0001's (owner, context_id)), by owner and status (new). The take-over
loop reads the tasks a gone replica drove from a partial index of the driven ones (`runner IS NOT
NULL`: a task at rest has none), so its cost follows the work in flight, not the tasks stored.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

DRIVEN = sa.text("runner IS NOT NULL")


def upgrade() -> None:
    # a database from ranch 0.1 kept its own table (0001), which had neither index of 0001
    present = {index["name"] for index in sa.inspect(op.get_bind()).get_indexes("ranch_tasks")}
    with op.batch_alter_table("ranch_tasks", schema=None) as batch_op:
        if "ranch_tasks_owner_context" in present:
            batch_op.drop_index("ranch_tasks_owner_context")
        if "ranch_tasks_owner_updated" not in present:
            batch_op.create_index("ranch_tasks_owner_updated", ["owner", "updated_ns", "id"])
        batch_op.create_index(
            "ranch_tasks_owner_context_updated", ["owner", "context_id", "updated_ns", "id"]
        )
        batch_op.create_index("ranch_tasks_owner_state_updated", ["owner", "state", "updated_ns", "id"])
        batch_op.create_index("ranch_tasks_runner", ["runner"], sqlite_where=DRIVEN, postgresql_where=DRIVEN)


def downgrade() -> None:
    with op.batch_alter_table("ranch_tasks", schema=None) as batch_op:
        batch_op.drop_index("ranch_tasks_runner")
        batch_op.drop_index("ranch_tasks_owner_state_updated")
        batch_op.drop_index("ranch_tasks_owner_context_updated")
        batch_op.create_index("ranch_tasks_owner_context", ["owner", "context_id"])
