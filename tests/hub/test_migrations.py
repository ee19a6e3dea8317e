"""Migrations: a fresh database reaches head, and one made by ranch 0.1 keeps its tasks."""

from __future__ import annotations

from pathlib import Path

import pytest
from a2a.types import Task, TaskState, TaskStatus
from sqlalchemy import inspect, text

from ranch.db import migrate
from ranch.db.engine import open_engine
from ranch.tasks.store import SqlTaskStore, owner_of
from ranch.tasks.store import owner_context as _ctx

pytestmark = pytest.mark.anyio

RANCH_0_1_TABLE = """
CREATE TABLE ranch_tasks (
    id VARCHAR(255) NOT NULL PRIMARY KEY, owner VARCHAR(255) NOT NULL, context_id VARCHAR(255) NOT NULL,
    state VARCHAR(32) NOT NULL, updated_ns BIGINT, body BLOB NOT NULL
)
"""


async def test_a_database_from_ranch_0_1_is_upgraded_with_its_tasks(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite+aiosqlite:///{tmp_path / 'old.db'}")
    store = SqlTaskStore(engine, owner_of)
    task = Task(id="t1", context_id="c1", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED))
    async with engine.begin() as connection:  # 0.1's only table, and one task in it
        await connection.execute(text(RANCH_0_1_TABLE))
        await connection.execute(
            text("INSERT INTO ranch_tasks VALUES ('t1', 'someone', 'c1', :state, NULL, :body)"),
            {"state": "TASK_STATE_COMPLETED", "body": task.SerializeToString()},
        )
    assert await migrate.current(engine) is None

    await migrate.upgrade(engine)
    await migrate.upgrade(engine)  # twice is a no-op

    assert await migrate.current(engine) == migrate.head()
    async with engine.connect() as connection:
        tables = set(await connection.run_sync(lambda sync: inspect(sync).get_table_names()))
    assert {"rooms", "messages", "executions", "events", "deliveries", "agents", "ranch_tasks"} <= tables
    assert "ranch_push_configs" in tables
    assert await store.get("t1", _ctx("someone")) == task
    await engine.dispose()
