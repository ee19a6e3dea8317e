"""The task core: every task ranch serves, live in memory while it runs, stored when it settles.

One `Run` drives one agent call for one task inside the app's task group, so a
caller that disconnects does not stop the work. The run folds the agent's
events into the task, fans them out to subscribers, and stores the task when it
is created and when it settles (terminal or interrupted). Nobody hears of a task,
or of its final state, before it is stored: when the store fails, callers get
`StoreUnavailable` instead. A direct `Message` reply to a new task is returned as
is: no task is created for it.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field

import anyio
from a2a.server.context import ServerCallContext
from a2a.types import (
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from google.protobuf.timestamp_pb2 import Timestamp

from ranch.agents.base import Agent, Call, Event
from ranch.exceptions import AgentTimeout, RanchError, StoreUnavailable
from ranch.ids import new_id
from ranch.tasks import listing
from ranch.tasks.push import PushNotifier
from ranch.tasks.store import SqlTaskStore
from ranch.wire.events import (
    CANCELED,
    COMPLETED,
    FAILED,
    INTERRUPTED,
    ROLE_AGENT,
    SUBMITTED,
    TERMINAL,
    WORKING,
    apply_artifact,
    merge_metadata,
)

logger = logging.getLogger(__name__)

SAVE_ATTEMPTS = 3
"""Tries to store a task (50 ms, then 200 ms apart) before the caller is told it failed."""
RECENT_TASKS = 1024
RECENT_BYTES = 32 * 1024 * 1024
"""Encoded bytes of the tasks kept in `recent`; the least recently stored go first."""
SUBSCRIBER_BUFFER = 1024
"""Events buffered per subscriber; one that falls this far behind is dropped (it can GetTask)."""


def owner_of(context: ServerCallContext) -> str:
    """The SDK store's owner resolver: ranch puts `agent/user` in the call state."""
    return str(context.state.get("ranch.owner", ""))


@dataclass
class Run:
    """One agent call for one task, and everyone watching it."""

    task_id: str
    context_id: str
    owner: str
    task: Task | None
    """None until the agent's first task event (a direct Message reply never makes one)."""
    reply: Message | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    subscribers: list[MemoryObjectSendStream[Event]] = field(default_factory=list)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    canceled: bool = False
    held: Event | None = None
    """The event that ended the run, published once the final state is stored."""
    shown: Task | None = None
    """What readers see while the final state is being stored: the task just before it."""
    error: StoreUnavailable | None = None
    """Set when the task could not be stored: callers get this instead of an unstored state."""

    @property
    def visible(self) -> Task | None:
        """The task as GetTask and ListTasks may show it: never a final state not yet stored."""
        return self.shown if self.shown is not None else self.task

    def subscribe(self) -> MemoryObjectReceiveStream[Event]:
        send, receive = anyio.create_memory_object_stream[Event](SUBSCRIBER_BUFFER)
        if self.done.is_set():
            send.close()
        else:
            self.subscribers.append(send)
        return receive

    def publish(self, event: Event) -> None:
        for stream in list(self.subscribers):
            try:
                stream.send_nowait(event)
            except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                self.subscribers.remove(stream)
                stream.close()

    def close(self) -> None:
        for stream in self.subscribers:
            stream.close()
        self.subscribers.clear()
        self.done.set()


class TaskCore:
    """Creates, continues, watches, cancels and stores tasks for every served agent."""

    def __init__(self, store: SqlTaskStore, group: TaskGroup, push: PushNotifier | None = None) -> None:
        self.store = store
        self.group = group
        self.push = push
        """Webhook deliveries; consulted per event only for tasks that have a push config."""
        self.live: dict[str, Run] = {}
        self.recent = RecentTasks()
        """Tasks stored lately, by id, with their owner: GetTask right after a turn skips the database."""

    # -- sending ------------------------------------------------------------------------------

    async def start(
        self,
        agent: Agent,
        message: Message,
        call: Call,
        owner: str,
        push_config: TaskPushNotificationConfig | None = None,
        *,
        submit: bool = False,
    ) -> Run:
        """Create or continue the task `message` belongs to and start the agent on it.

        A `push_config` sent with the message is stored before the agent starts, so its
        webhook hears every update. With `submit` (returnImmediately), the task is stored
        before the agent starts, so `run.task` is there to answer with at once, whatever
        the agent does first (a team may wait for another turn of the same context).
        """
        run = await self._prepare(message, owner)
        message.context_id, message.task_id = run.context_id, run.task_id
        if push_config is not None and self.push is not None:
            await self.push.store.set_info(run.task_id, push_config, _ctx(owner))
        if submit:
            await self._submit(run, message)
        self.live[run.task_id] = run
        self.group.start_soon(self._drive, run, agent, message, call)
        return run

    async def _prepare(self, message: Message, owner: str) -> Run:
        if not message.task_id:
            context_id = message.context_id or new_id()
            return Run(task_id=new_id(), context_id=context_id, owner=owner, task=None)
        if message.task_id in self.live and self.live[message.task_id].owner == owner:
            raise UnsupportedOperationError(
                f"task {message.task_id} is still working; wait for it or cancel it"
            )
        task = await self._stored(message.task_id, owner)
        if task is None:
            raise TaskNotFoundError(f"task {message.task_id} not found")
        if task.status.state in TERMINAL:
            state = TaskState.Name(task.status.state).removeprefix("TASK_STATE_").lower()
            raise UnsupportedOperationError(
                f"task {task.id} is {state}; send a message without taskId to start a new task"
            )
        if message.context_id and message.context_id != task.context_id:
            raise InvalidParamsError(f"message.contextId {message.context_id} does not match task {task.id}")
        _archive_status(task)
        task.history.append(message)
        return Run(task_id=task.id, context_id=task.context_id, owner=owner, task=task)

    async def _submit(self, run: Run, message: Message) -> None:
        """Store the task before the agent starts: SUBMITTED when new, WORKING when continued."""
        if run.task is None:
            await self._ensure_task(run, _copy_message(message))
            return
        task = _copy(run.task)
        _archive_status(task)
        task.status.CopyFrom(TaskStatus(state=WORKING))
        _stamp(task.status)
        await self._save(run.owner, task)
        run.task = task

    async def _drive(self, run: Run, agent: Agent, message: Message, call: Call) -> None:
        incoming = _copy_message(message)
        error: str | None = None
        with run.scope:
            try:
                with anyio.fail_after(agent.timeout):
                    async with aclosing(agent.run(message, call)) as events:  # closing releases its locks
                        async for event in events:
                            if await self._apply(run, event, incoming):
                                break
            except StoreUnavailable as exc:  # the task could not even be created: nothing to settle
                run.error = exc
            except TimeoutError:
                error = str(AgentTimeout(agent.id, agent.timeout))
            except RanchError as exc:
                error = str(exc)
            except Exception as exc:  # an agent's bug fails its task, never the server
                logger.exception("agent %s failed", agent.id)
                error = f"agent '{agent.id}' failed: {type(exc).__name__}: {exc}"
        try:
            if run.error is None:
                await self._settle(run, incoming, error)
        except StoreUnavailable as exc:
            run.error = exc
        finally:
            run.close()
            self.live.pop(run.task_id, None)
            if self.push is not None:
                self.push.finish(run.task_id)

    def _publish(self, run: Run, event: Event) -> None:
        """Tell the run's subscribers, and its webhooks when it has any."""
        run.publish(event)
        if self.push is not None and self.push.wants(run.task_id):
            self.push.notify(run.task_id, event)

    async def _apply(self, run: Run, event: Event, incoming: Message) -> bool:
        """Fold one event into the run; True when the agent's answer is complete.

        The event that completes it is held back (`run.held`) until `_settle` has stored it.
        """
        if isinstance(event, Message):
            return await self._apply_message(run, event, incoming)
        task = await self._ensure_task(run, incoming)
        if _ends(event) and run.shown is None:
            run.shown = _copy(task)
        if isinstance(event, Task):
            _merge_task(task, event)
            event = _copy(task)
        elif isinstance(event, TaskStatusUpdateEvent):
            event.task_id, event.context_id = run.task_id, run.context_id
            _archive_status(task)
            task.status.CopyFrom(event.status)
            _stamp(task.status)
            merge_metadata(task, event.metadata)
        elif isinstance(event, TaskArtifactUpdateEvent):
            event.task_id, event.context_id = run.task_id, run.context_id
            apply_artifact(task, event)
        if task.status.state in TERMINAL or task.status.state in INTERRUPTED:
            run.held = event
            return True
        run.shown = None
        self._publish(run, event)
        return False

    async def _apply_message(self, run: Run, message: Message, incoming: Message) -> bool:
        message.context_id = run.context_id
        if run.task is None:  # a direct reply: no task is created
            message.task_id = ""
            run.reply = message
            run.publish(message)
            return True
        message.task_id = run.task_id
        await self._apply(run, _status_event(run, COMPLETED, message), incoming)
        return True

    async def _ensure_task(self, run: Run, incoming: Message) -> Task:
        if run.task is None:
            task = Task(id=run.task_id, context_id=run.context_id, history=[incoming])
            task.status.state = SUBMITTED
            _stamp(task.status)
            await self._save(run.owner, task)  # stored before anyone is told it exists
            run.task = task
            self._publish(run, _copy(task))
        return run.task

    async def _settle(self, run: Run, incoming: Message, error: str | None) -> None:
        if run.task is None and run.reply is not None:
            return
        task = await self._ensure_task(run, incoming)
        if run.canceled:
            await self._apply(run, _status_event(run, CANCELED, _text(run, "canceled")), incoming)
        elif error is not None:
            await self._apply(run, _status_event(run, FAILED, _text(run, error)), incoming)
        elif task.status.state not in TERMINAL | INTERRUPTED:
            why = "the agent stopped before its task reached a final state"
            await self._apply(run, _status_event(run, FAILED, _text(run, why)), incoming)
        await self._save(run.owner, task)  # raises StoreUnavailable: the held event is never told
        run.shown = None
        if run.held is not None:
            self._publish(run, run.held)

    async def _save(self, owner: str, task: Task) -> None:
        """Store `task` (retried), then remember it in `recent`; StoreUnavailable when it cannot be."""
        self.recent.pop(task.id)
        for attempt in range(SAVE_ATTEMPTS):
            try:
                await self.store.save(task, _ctx(owner))
                break
            except Exception as exc:  # a busy or failing database: retried, then told to the caller
                if attempt + 1 == SAVE_ATTEMPTS:
                    logger.error(
                        "could not store task %s after %d attempts", task.id, SAVE_ATTEMPTS, exc_info=True
                    )
                    raise StoreUnavailable(task.id, _state_name(task), _cause(exc)) from exc
                logger.warning("storing task %s failed; retrying", task.id, exc_info=True)
                await anyio.sleep(0.05 * 4**attempt)
        self.recent.put(owner, _copy(task))

    async def _stored(self, task_id: str, owner: str) -> Task | None:
        cached = self.recent.get(task_id)
        if cached is not None and cached[0] == owner:
            return _copy(cached[1])
        return await self.store.get(task_id, _ctx(owner))

    # -- reading and cancelling ------------------------------------------------------------------

    async def get(self, task_id: str, owner: str) -> Task:
        run = self.live.get(task_id)
        if run is not None and run.owner == owner and run.visible is not None:
            return _copy(run.visible)
        task = await self._stored(task_id, owner)
        if task is None:
            raise TaskNotFoundError(f"task {task_id} not found")
        return task

    async def list(self, request: ListTasksRequest, owner: str) -> ListTasksResponse:
        """Filtered and ordered on each task's current state: running tasks come from memory."""
        running = {
            run.task_id: _copy(run.visible)
            for run in list(self.live.values())
            if run.owner == owner and run.visible is not None
        }
        stored, total = await self.store.page(request, _ctx(owner), exclude=running.keys())
        return listing.merge(stored, total, running.values(), request)

    async def cancel(self, task_id: str, owner: str) -> Task:
        """Cancel the hop in flight (or a task waiting for input) and record CANCELED."""
        run = self.live.get(task_id)
        if run is not None and run.owner == owner:
            run.canceled = True
            run.scope.cancel()
            with anyio.move_on_after(10):
                await run.done.wait()
            if run.error is not None:
                raise run.error
            return await self.get(task_id, owner)
        task = await self.get(task_id, owner)
        if task.status.state in TERMINAL:
            raise TaskNotCancelableError(f"task {task_id} already ended and cannot be canceled")
        _archive_status(task)
        task.status.CopyFrom(TaskStatus(state=CANCELED))
        _stamp(task.status)
        await self._save(owner, task)
        return task

    def watch(self, task_id: str, owner: str) -> tuple[Run, MemoryObjectReceiveStream[Event]] | None:
        run = self.live.get(task_id)
        if run is None or run.owner != owner or run.task is None:
            return None
        return run, run.subscribe()

    async def stream(self, run: Run, receive: MemoryObjectReceiveStream[Event]) -> AsyncIterator[Event]:
        """The run's events up to its end; StoreUnavailable last when its task could not be stored."""
        async with receive:
            async for event in receive:
                yield event
        if run.error is not None:
            raise run.error


class RecentTasks:
    """Tasks stored lately, bounded in number and in encoded bytes (least recently stored first)."""

    def __init__(self, max_count: int = RECENT_TASKS, max_bytes: int = RECENT_BYTES) -> None:
        self.max_count = max_count
        self.max_bytes = max_bytes
        self.size = 0
        """Encoded bytes of the tasks held."""
        self._tasks: OrderedDict[str, tuple[str, Task, int]] = OrderedDict()

    def get(self, task_id: str) -> tuple[str, Task] | None:
        held = self._tasks.get(task_id)
        return None if held is None else (held[0], held[1])

    def put(self, owner: str, task: Task) -> None:
        self.pop(task.id)
        size = task.ByteSize()
        if size > self.max_bytes:
            return  # larger than the whole cache: read from the database when asked
        self._tasks[task.id] = (owner, task, size)
        self.size += size
        while len(self._tasks) > self.max_count or self.size > self.max_bytes:
            _, (_, _, dropped) = self._tasks.popitem(last=False)
            self.size -= dropped

    def pop(self, task_id: str) -> None:
        held = self._tasks.pop(task_id, None)
        if held is not None:
            self.size -= held[2]

    def __len__(self) -> int:
        return len(self._tasks)

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._tasks

    def clear(self) -> None:
        self._tasks.clear()
        self.size = 0


async def fail_unfinished(store: SqlTaskStore) -> int:
    """Mark tasks a previous process left submitted or working as FAILED, with the reason.

    A run lives in one process; after a restart nothing will ever finish those tasks,
    and a task must not look like it is working forever.
    """
    unfinished = await store.unfinished([TaskState.Name(SUBMITTED), TaskState.Name(WORKING)])
    for task_id, owner in unfinished:
        task = await store.get(task_id, _ctx(owner))
        if task is None:
            continue
        _archive_status(task)
        text = "ranch restarted before this task finished; send the message again"
        message = Message(message_id=new_id(), role=ROLE_AGENT, parts=[Part(text=text)])
        message.context_id, message.task_id = task.context_id, task.id
        task.status.CopyFrom(TaskStatus(state=FAILED, message=message))
        _stamp(task.status)
        await store.save(task, _ctx(owner))
    return len(unfinished)


def _ctx(owner: str) -> ServerCallContext:
    return ServerCallContext(state={"ranch.owner": owner})


owner_context = _ctx
"""The call context the stores read `owner` from (`owner_of`)."""


def _copy(task: Task) -> Task:
    copy = Task()
    copy.CopyFrom(task)
    return copy


def _copy_message(message: Message) -> Message:
    copy = Message()
    copy.CopyFrom(message)
    return copy


def _ends(event: Event) -> bool:
    """True when `event` may move its task to a final (terminal or interrupted) state."""
    if isinstance(event, TaskStatusUpdateEvent) or (isinstance(event, Task) and event.HasField("status")):
        return event.status.state in TERMINAL or event.status.state in INTERRUPTED
    return False


def _state_name(task: Task) -> str:
    return str(TaskState.Name(task.status.state)).removeprefix("TASK_STATE_").lower()


def _cause(exc: Exception) -> str:
    """A database error in a few words: the driver's own message, without the SQL statement."""
    cause = getattr(exc, "orig", None) or exc
    text = str(cause).splitlines()[0] if str(cause) else ""
    return f"{type(cause).__name__}: {text[:160]}" if text else type(cause).__name__


def _stamp(status: TaskStatus) -> None:
    if not status.HasField("timestamp"):
        now = Timestamp()
        now.FromNanoseconds(time.time_ns())
        status.timestamp.CopyFrom(now)


def _archive_status(task: Task) -> None:
    """Move the current status message into history before the status changes."""
    if task.status.HasField("message") and task.status.message.parts:
        task.history.append(task.status.message)


def _merge_task(task: Task, incoming: Task) -> None:
    if incoming.HasField("status"):
        _archive_status(task)
        task.status.CopyFrom(incoming.status)
        _stamp(task.status)
    if incoming.artifacts:
        del task.artifacts[:]
        task.artifacts.extend(incoming.artifacts)
    merge_metadata(task, incoming.metadata)


def _text(run: Run, text: str) -> Message:
    return Message(
        message_id=new_id(),
        role=ROLE_AGENT,
        context_id=run.context_id,
        task_id=run.task_id,
        parts=[Part(text=text)],
    )


def _status_event(run: Run, state: TaskState, message: Message) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(
        task_id=run.task_id, context_id=run.context_id, status=TaskStatus(state=state, message=message)
    )
