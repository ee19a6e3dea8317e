"""The task core and storage: a failed save is retried, and an unstored state is never told."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from pathlib import Path

import anyio
import pytest
from a2a.server.context import ServerCallContext
from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus
from a2a.utils.errors import TaskNotFoundError
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import create_async_engine

from ranch.agents.base import Agent, AgentInfo, Call, Event
from ranch.db import migrate
from ranch.exceptions import StoreUnavailable
from ranch.tasks.engine import TaskEngine
from ranch.tasks.store import SqlTaskStore, owner_context, owner_of


class Finisher(Agent):
    """Answers every message with a completed task."""

    id = "finisher"

    async def info(self) -> AgentInfo:
        return AgentInfo(id=self.id, name=self.id)

    async def run(self, message: Message, call: Call) -> AsyncGenerator[Event, None]:
        yield Task(
            id=message.task_id,
            context_id=message.context_id,
            status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED),
        )


class StumblingStore(SqlTaskStore):
    """A real SQLite store whose first `failures` saves fail as a locked database does."""

    def __init__(self, *args: object, failures: int) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.failures = failures

    async def save(self, task: Task, context: ServerCallContext) -> None:
        if self.failures:
            self.failures -= 1
            raise OperationalError("INSERT", {}, Exception("database is locked"))
        await super().save(task, context)


@pytest.mark.anyio
async def test_a_failed_save_is_retried_and_the_task_is_stored(tmp_path: Path) -> None:
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 't.db'}")
    store = StumblingStore(engine, owner_of, failures=2)
    await migrate.upgrade(engine)
    try:
        async with anyio.create_task_group() as group:
            core = TaskEngine(store, group)
            message = Message(role=Role.ROLE_USER, message_id="m", parts=[Part(text="hi")])
            run = await core.start(Finisher(), message, Call(), owner="finisher/")
            with anyio.fail_after(5):
                await run.done.wait()
        core.recent.clear()  # read it back from the database, not from memory
        stored = await core.get(run.task_id, "finisher/")
        assert stored.status.state == TaskState.TASK_STATE_COMPLETED
        assert store.failures == 0
    finally:
        await engine.dispose()


class FailingStore(SqlTaskStore):
    """A real SQLite store whose saves fail, as a locked database's do, from save number `fail_from` on."""

    def __init__(self, *args: object, fail_from: int) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.fail_from = fail_from
        self.saves = 0

    async def save(self, task: Task, context: ServerCallContext) -> None:
        self.saves += 1
        if self.saves >= self.fail_from:
            raise OperationalError("INSERT", {}, Exception("database is locked"))
        await super().save(task, context)


def _hello() -> Message:
    return Message(role=Role.ROLE_USER, message_id="m", parts=[Part(text="hi")])


@pytest.mark.anyio
async def test_a_final_state_that_cannot_be_stored_is_never_told(tmp_path: Path) -> None:
    """The task is stored SUBMITTED; its COMPLETED save fails: watchers get an error, never COMPLETED."""
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 't.db'}")
    store = FailingStore(engine, owner_of, fail_from=2)
    await migrate.upgrade(engine)
    seen: list[Event] = []
    try:
        async with anyio.create_task_group() as group:
            core = TaskEngine(store, group)
            run = await core.start(Finisher(), _hello(), Call(), owner="finisher/")
            with anyio.fail_after(5), pytest.raises(StoreUnavailable) as raised:
                async for event in core.stream(run, run.subscribe()):
                    seen.append(event)
            await run.done.wait()
        assert run.error is raised.value
        assert run.task_id in str(raised.value) and "database is locked" in str(raised.value)
        assert all(
            not isinstance(event, Task) or event.status.state == TaskState.TASK_STATE_SUBMITTED
            for event in seen
        ), seen
        assert run.task_id not in core.recent
        stored = await core.get(run.task_id, "finisher/")  # from the database: still SUBMITTED
        assert stored.status.state == TaskState.TASK_STATE_SUBMITTED
    finally:
        await engine.dispose()


@pytest.mark.anyio
async def test_a_task_that_cannot_be_created_is_an_error_with_no_events(tmp_path: Path) -> None:
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 't.db'}")
    store = FailingStore(engine, owner_of, fail_from=1)
    await migrate.upgrade(engine)
    try:
        async with anyio.create_task_group() as group:
            core = TaskEngine(store, group)
            run = await core.start(Finisher(), _hello(), Call(), owner="finisher/")
            seen: list[Event] = []
            with anyio.fail_after(5), pytest.raises(StoreUnavailable):
                async for event in core.stream(run, run.subscribe()):
                    seen.append(event)
        assert seen == []
        assert run.task is None and "submitted" in str(run.error)
        with pytest.raises(TaskNotFoundError):
            await core.get(run.task_id, "finisher/")
    finally:
        await engine.dispose()


@pytest.mark.anyio
async def test_return_immediately_stores_the_task_before_answering(tmp_path: Path) -> None:
    """`submit`: the task is stored SUBMITTED before start() returns; a store failure is raised there."""
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 't.db'}")
    store = FailingStore(engine, owner_of, fail_from=2)
    await migrate.upgrade(engine)
    try:
        async with anyio.create_task_group() as group:
            core = TaskEngine(store, group)
            run = await core.start(Finisher(), _hello(), Call(), owner="finisher/", submit=True)
            assert run.task is not None and run.task.status.state == TaskState.TASK_STATE_SUBMITTED
            assert (await store.get(run.task_id, owner_context("finisher/"))) is not None
            with pytest.raises(StoreUnavailable):
                await core.start(Finisher(), _hello(), Call(), owner="finisher/", submit=True)
            with anyio.fail_after(5):
                await run.done.wait()
    finally:
        await engine.dispose()
