"""The task engine in process: runs, continuations, cancels, subscribers, room executions, restarts.

Every A2A task and every room execution runs in `TaskEngine`; these tests drive it directly
(a real SQLite store in a temporary file, agents defined here) so each rule is proven in
milliseconds, apart from the HTTP tests that show the same rules on the wire.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus, TaskStatusUpdateEvent
from a2a.utils.proto_utils import to_stream_response
from google.protobuf.json_format import MessageToDict
from redis.asyncio import Redis
from redis.exceptions import RedisError

from _support.hubkit import eventually
from ranch.agents.base import Agent, AgentInfo, Call, Event, reply, text_of
from ranch.db import migrate
from ranch.db.engine import open_engine
from ranch.fanout import RedisFanout
from ranch.rooms.turns import EXECUTION_TURNS
from ranch.tasks.engine import TaskEngine, task_log
from ranch.tasks.store import SqlTaskStore, owner_context, owner_of
from ranch.wire.keys import DONE, EXECUTION

pytestmark = pytest.mark.anyio
OWNER = "agent/alice"
COMPLETED = TaskState.TASK_STATE_COMPLETED
INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
REDIS = "redis://127.0.0.1:6379/0"


class Scripted(Agent):
    """Answers from a script: `ask` (INPUT_REQUIRED first), `sleep`, `fail`, `done`, or an echo."""

    def __init__(self, agent_id: str = "scripted", **script: object) -> None:
        self.id = agent_id
        self.script = script
        self.seen: list[Message] = []
        self.closed = 0
        self.timeout = float(script.get("timeout", 10.0))  # type: ignore[arg-type]

    async def info(self) -> AgentInfo:
        return AgentInfo(id=self.id, name=self.id)

    async def run(self, message: Message, call: Call) -> AsyncGenerator[Event, None]:
        self.seen.append(message)
        try:
            if self.script.get("sleep"):
                await anyio.sleep(float(self.script["sleep"]))  # type: ignore[arg-type]
            if self.script.get("fail"):
                raise RuntimeError(str(self.script["fail"]))
            if self.script.get("ask") and len(self.seen) == 1:
                question = reply(message, "What is your name?")
                yield TaskStatusUpdateEvent(
                    task_id=message.task_id,
                    context_id=message.context_id,
                    status=TaskStatus(state=INPUT_REQUIRED, message=question),
                )
                return
            answer = reply(message, f"heard: {text_of(message)}")
            if self.script.get("done"):
                answer.metadata.update({DONE: True})
            yield answer
        finally:
            self.closed += 1


def message(text: str, *, task_id: str = "", context_id: str = "") -> Message:
    return Message(
        message_id=f"m-{text}",
        role=Role.ROLE_USER,
        task_id=task_id,
        context_id=context_id,
        parts=[Part(text=text)],
    )


@asynccontextmanager
async def engine(tmp_path: Path, runner: str = "") -> AsyncIterator[TaskEngine]:
    database = open_engine(f"sqlite+aiosqlite:///{tmp_path / 'tasks.db'}")
    await migrate.upgrade(database)
    try:
        async with anyio.create_task_group() as group:
            yield TaskEngine(SqlTaskStore(database, owner_of), group, runner=runner)
            group.cancel_scope.cancel()
    finally:
        await database.dispose()


async def finished(tasks: TaskEngine, agent: Agent, sent: Message, **options: object) -> Task:
    run = await tasks.start(agent, sent, Call(), OWNER, **options)  # type: ignore[arg-type]
    with anyio.fail_after(10):
        await run.done.wait()
    assert run.task is not None
    return await tasks.get(run.task_id, OWNER)


async def test_a_direct_reply_makes_no_task(tmp_path: Path) -> None:
    async with engine(tmp_path) as tasks:
        run = await tasks.start(Scripted(), message("hi"), Call(), OWNER)
        await run.done.wait()
        assert run.reply is not None and text_of(run.reply) == "heard: hi"
        assert run.task is None and await tasks.owner_of(run.task_id) is None


async def test_an_answer_to_a_question_continues_the_same_task(tmp_path: Path) -> None:
    async with engine(tmp_path) as tasks:
        agent = Scripted(ask=True)
        asked = await finished(tasks, agent, message("book a table"))
        assert asked.status.state == INPUT_REQUIRED
        answered = await finished(tasks, agent, message("Ada", task_id=asked.id))
        assert answered.id == asked.id and answered.status.state == COMPLETED
        assert [text_of(m) for m in answered.history] == ["book a table", "What is your name?", "Ada"]
        with pytest.raises(Exception, match="completed; send a message without taskId"):
            await tasks.start(agent, message("more", task_id=asked.id), Call(), OWNER)


async def test_a_task_belongs_to_its_owner(tmp_path: Path) -> None:
    async with engine(tmp_path) as tasks:
        asked = await finished(tasks, Scripted(ask=True), message("hello"))
        assert await tasks.owner_of(asked.id) == OWNER
        with pytest.raises(Exception, match="not found"):
            await tasks.get(asked.id, "agent/mallory")
        with pytest.raises(Exception, match="not found"):
            await tasks.start(Scripted(), message("hijack", task_id=asked.id), Call(), "agent/mallory")


async def test_cancel_stops_the_agent_and_records_canceled(tmp_path: Path) -> None:
    async with engine(tmp_path) as tasks:
        agent = Scripted(sleep=30)
        run = await tasks.start(agent, message("slowly"), Call(), OWNER, submit=True)
        await eventually(lambda: agent.seen, what="the agent running")
        canceled = await tasks.cancel(run.task_id, OWNER, "changed my mind")
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        assert text_of(canceled.status.message) == "changed my mind"
        assert agent.closed == 1  # its generator was closed, not left running
        stored = await tasks.store.get(run.task_id, owner_context(OWNER))
        assert stored is not None and stored.status.state == TaskState.TASK_STATE_CANCELED


async def test_subscribers_see_every_event_in_order_then_the_end(tmp_path: Path) -> None:
    async with engine(tmp_path) as tasks:
        run = await tasks.start(Scripted(ask=True), message("question?"), Call(), OWNER)
        events = [event async for event in tasks.stream(run, run.subscribe())]
        assert isinstance(events[0], Task) and events[0].status.state == TaskState.TASK_STATE_SUBMITTED
        assert isinstance(events[-1], TaskStatusUpdateEvent) and events[-1].status.state == INPUT_REQUIRED


async def test_failures_and_timeouts_fail_the_task_naming_the_agent(tmp_path: Path) -> None:
    async with engine(tmp_path) as tasks:
        broken = await finished(tasks, Scripted("broken", fail="boom"), message("x"), submit=True)
        assert broken.status.state == TaskState.TASK_STATE_FAILED
        assert text_of(broken.status.message) == "agent 'broken': RuntimeError: boom"
        late = await finished(tasks, Scripted("late", sleep=5, timeout=0.1), message("y"), submit=True)
        assert late.status.state == TaskState.TASK_STATE_FAILED
        assert text_of(late.status.message) == "agent 'late': no answer within its timeout of 0.1s"


async def test_a_room_execution_stays_ready_between_messages_until_its_agent_is_done(tmp_path: Path) -> None:
    async with engine(tmp_path) as tasks:
        agent = Scripted()
        first = await finished(
            tasks, agent, message("one", context_id="room-1"), task_id="ex-1", lifetime=EXECUTION_TURNS
        )
        assert first.id == "ex-1" and first.status.state == INPUT_REQUIRED
        assert MessageToDict(first.metadata)[EXECUTION]["status"] == "ready"
        assert [a.parts[0].text for a in first.artifacts] == ["heard: one"]
        assert list(first.history) == []  # an execution's history is its room's
        second = await finished(
            tasks, agent, message("two", context_id="room-1"), task_id="ex-1", lifetime=EXECUTION_TURNS
        )
        assert second.status.state == INPUT_REQUIRED
        assert [a.parts[0].text for a in second.artifacts] == ["heard: two"]  # this turn's only

        closer = Scripted("closer", done=True)
        done = await finished(
            tasks, closer, message("bye", context_id="room-1"), task_id="ex-2", lifetime=EXECUTION_TURNS
        )
        assert done.status.state == COMPLETED
        assert MessageToDict(done.metadata)[EXECUTION]["status"] == "completed"


async def test_a_stopped_replicas_running_tasks_fail_and_nothing_else(tmp_path: Path) -> None:
    async with engine(tmp_path, runner="first") as tasks:
        run = await tasks.start(Scripted(sleep=30), message("long"), Call(), OWNER, submit=True)
        external = await tasks.record("ex-9", "room:r", TaskState.TASK_STATE_WORKING, context_id="r")
        assert run.task is not None and external.status.state == TaskState.TASK_STATE_WORKING
        # the process dies here: its group is cancelled without settling anything
        tasks.group.cancel_scope.cancel()
    async with engine(tmp_path, runner="second") as tasks:
        assert await tasks.take_over({"first", "second"}) == {}  # "first" is still alive: nothing to take
        failed = await tasks.take_over({"second"})
        assert list(failed) == [run.task_id]
        assert "(replica first) stopped before it finished" in text_of(failed[run.task_id].status.message)
        assert await tasks.take_over({"second"}) == {}  # taken once
        kept = await tasks.get("ex-9", "room:r")  # an outside party works on it: left as it was
        assert kept.status.state == TaskState.TASK_STATE_WORKING


async def test_a_subscriber_on_another_replica_follows_a_run_that_has_not_logged_yet(tmp_path: Path) -> None:
    """Right after a returnImmediately, the task is stored WORKING on the replica that runs it and
    its log is still empty: a SubscribeToTask on another replica waits for the log, not ends."""
    try:
        async with Redis.from_url(REDIS) as probe:
            await probe.ping()
    except (RedisError, OSError) as exc:
        pytest.fail(f"this test needs Redis at 127.0.0.1:6379: {exc}")
    database = open_engine(f"sqlite+aiosqlite:///{tmp_path / 'tasks.db'}")
    await migrate.upgrade(database)
    try:
        async with RedisFanout(REDIS, prefix=f"ranch-test-{uuid.uuid4().hex[:8]}") as fanout:
            async with anyio.create_task_group() as group:
                tasks = TaskEngine(SqlTaskStore(database, owner_of), group, runner="second", fanout=fanout)
                await tasks.record("t-1", OWNER, TaskState.TASK_STATE_WORKING, context_id="c-1")
                followed = await tasks.follow("t-1", OWNER)
                assert followed is not None
                first = await anext(followed)
                assert isinstance(first, Task) and first.status.state == TaskState.TASK_STATE_WORKING
                ended = TaskStatusUpdateEvent(
                    task_id="t-1", context_id="c-1", status=TaskStatus(state=COMPLETED)
                )  # the running replica's first logged event
                await fanout.append(task_log("t-1"), to_stream_response(ended).SerializeToString(), ttl=60)
                with anyio.fail_after(10):
                    rest = [event async for event in followed]
                assert [e.status.state for e in rest if isinstance(e, TaskStatusUpdateEvent)] == [COMPLETED]
                group.cancel_scope.cancel()
    finally:
        await database.dispose()
