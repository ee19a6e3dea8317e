"""The task core keeps answers when storage stumbles: a failed save is retried, not lost."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from pathlib import Path

import anyio
import pytest
from a2a.server.context import ServerCallContext
from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import create_async_engine

from ranch.agents.base import Agent, AgentInfo, Call, Event
from ranch.hub.store import SqlTaskStore
from ranch.hub.tasks import TaskCore, owner_of


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
    await store.initialize()
    try:
        async with anyio.create_task_group() as group:
            core = TaskCore(store, group)
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
