"""ranch_task_counts: each owner's tasks counted by state; executions: an index of the open ones

ListTasks must answer `totalSize` (A2A 1.0 marks it required) and counted every match of the
caller on every page: at a million tasks, a scan of the caller's index per call. The count per
(owner, state) is kept by triggers on `ranch_tasks` (insert, delete, a change of owner or state:
the save's upsert, retention's deletes and any hand-made change alike), so an unfiltered or
status-filtered ListTasks reads at most nine rows. Existing tasks are counted once here.

A room post finds its agent's open execution (`rooms/executions.py current`): the partial index
holds only the executions not yet ended, by (room, agent, created), so the read no longer sorts
every execution the agent ever had in the room.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

OPEN = sa.text("status NOT IN ('completed', 'failed', 'canceled')")

SQLITE_TRIGGERS = (
    """
    CREATE TRIGGER ranch_task_counts_insert AFTER INSERT ON ranch_tasks
    BEGIN
        INSERT INTO ranch_task_counts (owner, state, tasks) VALUES (NEW.owner, NEW.state, 1)
        ON CONFLICT (owner, state) DO UPDATE SET tasks = tasks + 1;
    END
    """,
    """
    CREATE TRIGGER ranch_task_counts_delete AFTER DELETE ON ranch_tasks
    BEGIN
        UPDATE ranch_task_counts SET tasks = tasks - 1 WHERE owner = OLD.owner AND state = OLD.state;
    END
    """,
    """
    CREATE TRIGGER ranch_task_counts_update AFTER UPDATE OF owner, state ON ranch_tasks
    WHEN OLD.owner IS NOT NEW.owner OR OLD.state IS NOT NEW.state
    BEGIN
        UPDATE ranch_task_counts SET tasks = tasks - 1 WHERE owner = OLD.owner AND state = OLD.state;
        INSERT INTO ranch_task_counts (owner, state, tasks) VALUES (NEW.owner, NEW.state, 1)
        ON CONFLICT (owner, state) DO UPDATE SET tasks = tasks + 1;
    END
    """,
)
POSTGRES_TRIGGERS = (
    """
    CREATE FUNCTION ranch_task_counts_follow() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            UPDATE ranch_task_counts SET tasks = tasks - 1 WHERE owner = OLD.owner AND state = OLD.state;
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO ranch_task_counts (owner, state, tasks) VALUES (NEW.owner, NEW.state, 1)
            ON CONFLICT (owner, state) DO UPDATE SET tasks = ranch_task_counts.tasks + 1;
        END IF;
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER ranch_task_counts_insert_delete AFTER INSERT OR DELETE ON ranch_tasks
    FOR EACH ROW EXECUTE FUNCTION ranch_task_counts_follow()
    """,
    """
    CREATE TRIGGER ranch_task_counts_update AFTER UPDATE OF owner, state ON ranch_tasks
    FOR EACH ROW WHEN (OLD.owner IS DISTINCT FROM NEW.owner OR OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION ranch_task_counts_follow()
    """,
)


def upgrade() -> None:
    op.create_table(
        "ranch_task_counts",
        sa.Column("owner", sa.String(255), primary_key=True),
        sa.Column("state", sa.String(32), primary_key=True),
        sa.Column("tasks", sa.BigInteger(), nullable=False, server_default="0"),
    )
    op.execute(
        "INSERT INTO ranch_task_counts (owner, state, tasks) "
        "SELECT owner, state, count(*) FROM ranch_tasks GROUP BY owner, state"
    )
    postgres = op.get_bind().dialect.name == "postgresql"
    for statement in POSTGRES_TRIGGERS if postgres else SQLITE_TRIGGERS:
        op.execute(statement)
    op.create_index(
        "executions_open",
        "executions",
        ["room_id", "agent_id", "created_at"],
        sqlite_where=OPEN,
        postgresql_where=OPEN,
    )


def downgrade() -> None:
    op.drop_index("executions_open", table_name="executions")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER ranch_task_counts_update ON ranch_tasks")
        op.execute("DROP TRIGGER ranch_task_counts_insert_delete ON ranch_tasks")
        op.execute("DROP FUNCTION ranch_task_counts_follow()")
    else:
        for name in ("update", "delete", "insert"):
            op.execute(f"DROP TRIGGER ranch_task_counts_{name}")
    op.drop_table("ranch_task_counts")
