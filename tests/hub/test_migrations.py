"""Migrations: a fresh database reaches head, and one made by ranch 0.1 keeps its tasks."""

from __future__ import annotations

from pathlib import Path

import pytest
from a2a.types import Task, TaskState, TaskStatus
from sqlalchemy import inspect

from ranch.db import migrate
from ranch.db.engine import open_engine
from ranch.db.models import ranch_tasks
from ranch.tasks.engine import _ctx, owner_of
from ranch.tasks.store import SqlTaskStore

pytestmark = pytest.mark.anyio


async def test_a_database_from_ranch_0_1_is_upgraded_with_its_tasks(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite+aiosqlite:///{tmp_path / 'old.db'}")
    store = SqlTaskStore(engine, owner_of)
    async with engine.begin() as connection:  # how 0.1 created its only table
        await connection.run_sync(ranch_tasks.create)
    task = Task(id="t1", context_id="c1", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED))
    await store.save(task, _ctx("someone"))
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
