"""execution_handoffs: an execution handed its work by another, and the child a parent waits for

An agent in a room hands work to another agent of the room: ranch creates a child execution
linked to its parent (`parent_execution_id`, indexed: a parent's children are listed), and the
parent, whose status becomes `handoff`, names the child it waits for (`handoff_to`). The status
column is a VARCHAR of the execution vocabulary: `handoff` needs no change there.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("executions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("parent_execution_id", sa.String(64), nullable=True))
        batch_op.add_column(sa.Column("handoff_to", sa.String(64), nullable=True))
    op.create_index("executions_parent", "executions", ["parent_execution_id"])


def downgrade() -> None:
    op.drop_index("executions_parent", table_name="executions")
    with op.batch_alter_table("executions", schema=None) as batch_op:
        batch_op.drop_column("handoff_to")
        batch_op.drop_column("parent_execution_id")
