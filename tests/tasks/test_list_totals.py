"""ListTasks' `totalSize` stays exact while tasks change state, end and are pruned, and costs no count
of the caller's tasks (issue 41): an owner's counts by state are kept as tasks are written."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from a2a.types import ListTasksRequest, Task, TaskState, TaskStatus
from sqlalchemy import delete, event, insert
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine

from ranch.db import migrate
from ranch.db.engine import open_engine
from ranch.db.models import ranch_tasks
from ranch.tasks.store import SqlTaskStore, owner_context, owner_of

pytestmark = pytest.mark.anyio

WORKING, COMPLETED, FAILED = (
    TaskState.TASK_STATE_WORKING,
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
)
COUNT_OF_TASKS = re.compile(r"count\(\*\)[^;]*\bFROM ranch_tasks\b", re.IGNORECASE | re.DOTALL)


def task(number: int, state: TaskState, context: str = "c") -> Task:
    status = TaskStatus(state=state)
    status.timestamp.FromSeconds(1_700_000_000 + number)
    return Task(id=f"t{number:03d}", context_id=context, status=status)


@contextmanager
def counts_of_tasks() -> Iterator[list[str]]:
    """Every statement that counts rows of `ranch_tasks`, other than the running tasks by id."""
    found: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if COUNT_OF_TASKS.search(statement) and "ranch_tasks.id IN" not in statement:
            found.append(" ".join(statement.split()))

    event.listen(Engine, "before_cursor_execute", record)
    try:
        yield found
    finally:
        event.remove(Engine, "before_cursor_execute", record)


async def totals(store: SqlTaskStore, owner: str, exclude: tuple[str, ...] = ()) -> dict[str, int]:
    """`totalSize` of a one-task first page: unfiltered, and for each state."""
    answers: dict[str, int] = {}
    for name, state in (("all", None), ("working", WORKING), ("completed", COMPLETED), ("failed", FAILED)):
        request = ListTasksRequest(page_size=1, status=state)
        _rows, answers[name] = await store.page(request, owner_context(owner), exclude=exclude)
    return answers


async def test_total_size_follows_saves_state_changes_and_deletes_without_counting_tasks(
    database_url: str,
) -> None:
    engine = open_engine(database_url)
    store = SqlTaskStore(engine, owner_of)
    try:
        for number in range(12):
            await store.save(task(number, WORKING), owner_context("desk/alice"))
        for number in range(12, 15):
            await store.save(task(number, FAILED), owner_context("desk/bob"))
        for number in range(5):  # five of alice's end
            await store.save(task(number, COMPLETED), owner_context("desk/alice"))
        await store.save(task(0, FAILED), owner_context("desk/bob"))  # not bob's: changes nothing
        await store.delete("t005", owner_context("desk/alice"))
        async with engine.begin() as connection:  # as retention prunes: rows deleted, not through the store
            await connection.execute(delete(ranch_tasks).where(ranch_tasks.c.id.in_(["t000", "t001"])))

        with counts_of_tasks() as counted:
            alice = await totals(store, "desk/alice")
            bob = await totals(store, "desk/bob")
            running = await totals(store, "desk/alice", exclude=("t006", "t007", "unknown"))
        assert alice == {"all": 9, "working": 6, "completed": 3, "failed": 0}
        assert bob == {"all": 3, "working": 0, "completed": 0, "failed": 3}
        # the tasks running in this process are listed from memory: the store leaves them out
        assert running == {"all": 7, "working": 4, "completed": 3, "failed": 0}
        assert counted == []

        in_context = ListTasksRequest(page_size=1, context_id="c")  # a conversation's own tasks
        assert (await store.page(in_context, owner_context("desk/alice")))[1] == 9
    finally:
        await engine.dispose()


async def test_tasks_stored_before_the_counts_are_counted_by_the_upgrade(empty_database_url: str) -> None:
    engine: AsyncEngine = open_engine(empty_database_url)
    try:
        await migrate.upgrade(engine, "0015")
        rows = [
            {
                "id": f"t{number}",
                "owner": "desk/alice" if number % 3 else "desk/bob",
                "context_id": "c",
                "state": "TASK_STATE_COMPLETED" if number % 2 else "TASK_STATE_FAILED",
                "updated_ns": number,
                "body": task(number, COMPLETED).SerializeToString(),
            }
            for number in range(30)
        ]
        async with engine.begin() as connection:
            await connection.execute(insert(ranch_tasks), rows)
        await migrate.upgrade(engine)

        store = SqlTaskStore(engine, owner_of)
        with counts_of_tasks() as counted:
            alice = await totals(store, "desk/alice")
            await store.save(task(99, WORKING), owner_context("desk/alice"))
            after = await totals(store, "desk/alice")
        assert alice == {"all": 20, "working": 0, "completed": 10, "failed": 10}
        assert after == {"all": 21, "working": 1, "completed": 10, "failed": 10}
        assert counted == []
    finally:
        await engine.dispose()
