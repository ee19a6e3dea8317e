"""ranch_tasks.runner: the process driving a task, so a restart fails only what a process left running

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ranch_tasks", schema=None) as batch_op:
        batch_op.add_column(sa.Column("runner", sa.String(length=64), nullable=True))
    # before this revision every unfinished task had a process driving it
    op.execute(
        "UPDATE ranch_tasks SET runner = 'before-0004' "
        "WHERE state IN ('TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING')"
    )


def downgrade() -> None:
    with op.batch_alter_table("ranch_tasks", schema=None) as batch_op:
        batch_op.drop_column("runner")
