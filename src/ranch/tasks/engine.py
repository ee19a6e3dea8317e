"""The task engine: every A2A task ranch serves, and every room execution, runs here.

One `Run` drives one agent call for one task inside the app's task group, so a caller
that disconnects does not stop the work: `invoke` gives the call its timeout and error
rules, `TaskFold` folds its events into the task, subscribers and webhooks hear them, a
`RunSink` (a room's) sees them in order, and the task is stored when it is created and
when it settles (terminal, or waiting for input). Nobody hears of a task, or of its final
state, before it is stored: when the store fails, callers get `StoreUnavailable`.

A direct `Message` reply to a new task is returned as is: no task is created for it.

A *long-lived* run is one turn of a room execution (docs/api.md, "Executions as A2A
tasks"): the task continues across messages, so an agent's normal answer leaves it
INPUT_REQUIRED with `metadata["ranch.execution"].status = "ready"` (the reply as its status
message and as its `reply` artifact) instead of COMPLETED; the agent ends the execution
by marking its reply `metadata["ranch.done"] = true`. Its history is the room's (rooms
build it from room messages), so the stored task keeps none, and each turn starts with
no artifacts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from typing import TypeVar

import anyio
import orjson
from a2a.types import (
    Artifact,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils import proto_utils
from a2a.utils.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from anyio.abc import TaskGroup
from anyio.abc import TaskStatus as AnyioTaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream
from google.protobuf.struct_pb2 import Struct, Value
from google.protobuf.timestamp_pb2 import Timestamp

from ranch.agents.base import Agent, Call, Event
from ranch.agents.fold import TaskFold, archive_status, state_name
from ranch.agents.invoke import invoke
from ranch.db.engine import cause_of
from ranch.exceptions import RanchError, StoreUnavailable
from ranch.fanout import Fanout, MemoryFanout, Record
from ranch.fanout.hearing import hear
from ranch.ids import new_id
from ranch.observe import metrics
from ranch.tasks import listing
from ranch.tasks.push import CONTROL, PushNotifier
from ranch.tasks.run import RecentTasks, Run, RunSink
from ranch.tasks.store import SqlTaskStore, owner_context
from ranch.wire import keys
from ranch.wire.events import (
    CANCELED,
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    INTERRUPTED,
    ROLE_AGENT,
    SUBMITTED,
    TERMINAL,
    WORKING,
)

logger = logging.getLogger(__name__)
Proto = TypeVar("Proto", Task, Message)

SAVE_ATTEMPTS = 3
"""Tries to store a task (50 ms, then 200 ms apart) before the caller is told it failed."""
STOP_GRACE = 10.0
"""Seconds CancelTask waits for a stopped run to store its final state."""
READY = "ready"
"""An execution's status between messages (INPUT_REQUIRED on the wire, this in its metadata)."""
LOG_TTL = 3600.0
"""Seconds a task's log of events is kept after its last event (other replicas read it)."""
FOLLOW_IDLE = 30.0
"""Seconds a replica following another's run waits for its next event before it looks again."""
STOP_POLL = 0.05
"""Seconds between looks at a task another replica was asked to stop."""


def task_log(task_id: str) -> str:
    """The fan-out log of a task's events, which other replicas read."""
    return f"task:{task_id}"


class TaskEngine:
    """Creates, continues, watches, cancels and stores tasks for every served agent and room."""

    def __init__(
        self,
        store: SqlTaskStore,
        group: TaskGroup,
        push: PushNotifier | None = None,
        *,
        runner: str = "",
        fanout: Fanout | None = None,
    ) -> None:
        self.store = store
        self.group = group
        self.push = push
        self.fanout = fanout or MemoryFanout()
        """Where a run's events also go when other replicas must see them (`fanout.shared`): a log per
        task, which SubscribeToTask and GetTask on another replica read (`follow`, `get`)."""
        """Webhook deliveries; consulted per event only for tasks that have a push config."""
        self.runner = runner or new_id()
        """This process, as stored with the tasks it is running (a restart fails what it left running)."""
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
        task_id: str | None = None,
        long_lived: bool = False,
        sink: RunSink | None = None,
    ) -> Run:
        """Create or continue the task `message` belongs to and start the agent on it.

        `task_id` names the task to continue, or to create when it does not exist yet (a room
        execution's). A `push_config` sent with the message is stored before the agent starts,
        so its webhook hears every update. With `submit` (returnImmediately), the task is stored
        before the agent starts, so `run.task` is there to answer with at once, whatever the
        agent does first (a team may wait for another turn of the same context).
        """
        run = await self._prepare(message, owner, task_id, long_lived)
        run.sink = sink
        message.context_id, message.task_id = run.context_id, run.task_id
        if push_config is not None and self.push is not None:
            await self.push.store.set_info(run.task_id, push_config, owner_context(owner))
        if submit or long_lived:
            await self._submit(run, message)
        self._log_snapshot(run)
        self.live[run.task_id] = run
        self.group.start_soon(self._drive, run, agent, message, call)
        return run

    async def _prepare(self, message: Message, owner: str, task_id: str | None, long_lived: bool) -> Run:
        wanted = task_id or message.task_id
        if not wanted:
            context_id = message.context_id or new_id()
            return Run(task_id=new_id(), context_id=context_id, owner=owner, task=None)
        running = self.live.get(wanted)
        if running is not None and running.owner == owner:
            raise UnsupportedOperationError(f"task {wanted} is still working; wait for it or cancel it")
        task = await self._stored(wanted, owner)
        if task is None and task_id is not None and await self.store.owner(task_id) is None:
            # a room execution's first turn
            return Run(
                task_id=task_id, context_id=message.context_id, owner=owner, task=None, long_lived=True
            )
        if task is None:
            raise TaskNotFoundError(f"task {wanted} not found")
        if task.status.state in TERMINAL:
            raise UnsupportedOperationError(
                f"task {task.id} is {state_name(task.status.state)}; "
                "send a message without taskId to start a new task"
            )
        if message.context_id and message.context_id != task.context_id:
            raise InvalidParamsError(f"message.contextId {message.context_id} does not match task {task.id}")
        archive_status(task)
        task.status.ClearField("message")  # archived: the next status change must not archive it again
        if long_lived:
            del task.artifacts[:]  # each turn of an execution starts with no artifacts
            del task.history[:]  # its history is the room's
        else:
            task.history.append(message)
        return Run(task_id=task.id, context_id=task.context_id, owner=owner, task=task, long_lived=long_lived)

    async def _submit(self, run: Run, message: Message) -> None:
        """Store the task before the agent starts: SUBMITTED when new, WORKING when continued."""
        if run.task is None:
            await self._ensure_task(run, _copy(message))
            if not run.long_lived:
                return
        assert run.task is not None
        task = _copy(run.task)
        archive_status(task)
        task.status.CopyFrom(TaskStatus(state=WORKING))
        _stamp(task.status)
        if run.long_lived:
            del task.history[:]
            _mark(task, "working")
        await self._save(run, task)
        run.task = task

    async def _drive(self, run: Run, agent: Agent, message: Message, call: Call) -> None:
        incoming = _copy(message)
        metrics.runs(+1)
        try:
            await self._run(run, agent, message, call, incoming)
        finally:
            metrics.runs(-1)

    async def _run(self, run: Run, agent: Agent, message: Message, call: Call, incoming: Message) -> None:
        try:
            error = await self._agent_part(run, agent, message, call, incoming)
            if run.error is None:
                await self._settle(run, incoming, error)
        except StoreUnavailable as exc:
            run.error = exc
        finally:  # also when the hub stops mid-run: its subscribers and webhook queue are closed
            run.close()
            self.live.pop(run.task_id, None)
            if self.push is not None:
                self.push.finish(run.task_id)

    async def _agent_part(
        self, run: Run, agent: Agent, message: Message, call: Call, incoming: Message
    ) -> str | None:
        """The agent's events applied to the run until it ends or is canceled (`run.scope`); the
        error the task ends with, if any."""
        with run.scope:
            try:
                async with invoke(agent, message, call) as events:  # leaving it releases the agent's locks
                    async for event in events:
                        if await self._apply(run, event, incoming):
                            break
            except StoreUnavailable as exc:  # the task could not even be created: nothing to settle
                run.error = exc
            except RanchError as exc:  # a timeout, or the agent failed
                return str(exc)
            except Exception as exc:  # ranch's own part failed (a room sink): the task says so
                logger.exception("the run of task %s failed", run.task_id)
                return f"ranch could not finish this task: {type(exc).__name__}: {exc}"
        return None

    def _publish(self, run: Run, event: Event) -> None:
        """Tell the run's subscribers, its webhooks when it has any, and other replicas when there are."""
        run.publish(event)
        if self.push is not None and self.push.wants(run.task_id):
            self.push.notify(run.task_id, event)
        if self.fanout.shared:
            run.logged.append(event)
            if len(run.logged) == 1:
                self.group.start_soon(self._log, run)

    async def _log(self, run: Run) -> None:
        """Append the run's events to its task's log, in order (one writer per run)."""
        while run.logged:
            event = run.logged[0]
            data = proto_utils.to_stream_response(event).SerializeToString()
            try:
                await self.fanout.append(task_log(run.task_id), data, ttl=LOG_TTL)
            except Exception:  # other replicas' subscribers miss it; this replica's do not
                logger.warning("could not log an event of task %s for replicas", run.task_id, exc_info=True)
            run.logged.pop(0)

    def _log_snapshot(self, run: Run) -> None:
        """A continued task's log starts with the task as it is (a follower folds from the newest)."""
        if self.fanout.shared and run.task is not None:
            run.logged.append(_copy(run.task))
            if len(run.logged) == 1:
                self.group.start_soon(self._log, run)

    async def _apply(self, run: Run, event: Event, incoming: Message) -> bool:
        """Fold one event into the run; True when the agent's answer is complete.

        The event that completes it is held back (`run.held`) until `_settle` has stored it.
        """
        if isinstance(event, Message):
            return await self._apply_message(run, event, incoming)
        task = await self._ensure_task(run, incoming)
        if run.long_lived:
            event = _as_execution(event)
        if _ends(event) and run.shown is None:
            run.shown = _copy(task)
        if isinstance(event, TaskStatusUpdateEvent | TaskArtifactUpdateEvent):
            event.task_id, event.context_id = run.task_id, run.context_id
        was = task.status.state
        final = TaskFold(run.task_id, task).fold(event)
        if self.fanout.shared and was != WORKING and task.status.state == WORKING:
            await self._save(run, task)  # ListTasks on another replica filters on the stored state
        if isinstance(event, Task | TaskStatusUpdateEvent):
            _stamp(task.status)
        if run.long_lived:
            del task.history[:]  # an execution's history is the room's
        if isinstance(event, Task):
            event = _copy(task)
        if run.sink is not None:
            await run.sink.event(run, event)
        if final:
            run.held = event
            return True
        run.shown = None
        self._publish(run, event)
        return False

    async def _apply_message(self, run: Run, message: Message, incoming: Message) -> bool:
        message.context_id = run.context_id
        if run.task is None and not run.long_lived:  # a direct reply: no task is created
            message.task_id = ""
            run.reply = message
            if run.sink is not None:
                await run.sink.event(run, message)
            run.publish(message)
            return True
        message.task_id = run.task_id
        if run.long_lived:
            await self._apply(
                run,
                TaskArtifactUpdateEvent(
                    task_id=run.task_id,
                    context_id=run.context_id,
                    artifact=Artifact(artifact_id=f"{run.task_id}-reply", name="reply", parts=message.parts),
                    last_chunk=True,
                ),
                incoming,
            )
        await self._apply(run, _status_event(run, COMPLETED, message), incoming)
        return True

    async def _ensure_task(self, run: Run, incoming: Message) -> Task:
        if run.task is None:
            history = [] if run.long_lived else [incoming]
            task = Task(id=run.task_id, context_id=run.context_id, history=history)
            task.status.state = SUBMITTED
            _stamp(task.status)
            await self._save(run, task)  # stored before anyone is told it exists
            run.task = task
            self._publish(run, _copy(task))
        return run.task

    async def _settle(self, run: Run, incoming: Message, error: str | None) -> None:
        if run.task is None and run.reply is not None:
            if run.sink is not None:
                await run.sink.settled(run)
            return
        task = await self._ensure_task(run, incoming)
        if run.ending is not None:
            state = CANCELED if run.ending == "canceled" else COMPLETED
            ended = _text(run, run.ending_reason or run.ending)
            ended.metadata.fields[keys.DONE].bool_value = True  # an execution ended from outside stays ended
            await self._apply(run, _status_event(run, state, ended), incoming)
        elif error is not None:
            await self._apply(run, _status_event(run, FAILED, _text(run, error)), incoming)
        elif task.status.state not in TERMINAL | INTERRUPTED:
            why = "the agent stopped before its task reached a final state"
            await self._apply(run, _status_event(run, FAILED, _text(run, why)), incoming)
        await self._save(run, task)  # raises StoreUnavailable: the held event is never told
        run.shown = None
        if run.sink is not None:
            try:
                await run.sink.settled(run)
            except Exception:  # the task is stored; the sink's failure is logged, not the caller's
                logger.exception("the sink of task %s failed to settle", run.task_id)
        if run.held is not None:
            self._publish(run, run.held)

    async def _save(self, run: Run, task: Task) -> None:
        await self._store(run.owner, task, runner=None if _at_rest(task) else self.runner)

    async def _store(self, owner: str, task: Task, runner: str | None = None) -> None:
        """Store `task` (retried), then remember it in `recent`; StoreUnavailable when it cannot be."""
        self.recent.pop(task.id)
        for attempt in range(SAVE_ATTEMPTS):
            try:
                await self.store.save(task, owner_context(owner, runner))
                break
            except Exception as exc:  # a busy or failing database: retried, then told to the caller
                if attempt + 1 == SAVE_ATTEMPTS:
                    logger.error(
                        "could not store task %s after %d attempts", task.id, SAVE_ATTEMPTS, exc_info=True
                    )
                    raise StoreUnavailable(task.id, state_name(task.status.state), cause_of(exc)) from exc
                logger.warning("storing task %s failed; retrying", task.id, exc_info=True)
                await anyio.sleep(0.05 * 4**attempt)
        self.recent.put(owner, _copy(task))

    async def _stored(self, task_id: str, owner: str) -> Task | None:
        cached = self.recent.get(task_id)
        if cached is not None and cached[0] == owner:
            return _copy(cached[1])
        return await self.store.get(task_id, owner_context(owner))

    # -- changing a task no run drives ------------------------------------------------------------

    async def record(
        self,
        task_id: str,
        owner: str,
        state: TaskState,
        text: str = "",
        *,
        context_id: str = "",
        execution: str | None = None,
    ) -> Task:
        """Move a task that no run drives to `state` (created when new, in `context_id`) and store it.

        Rooms use it for what happens to an execution outside a run: an external agent working on
        a delivery (no process of ours runs it, so a restart leaves it working), a team's member
        taking a hop, a cancel or completion while idle. `execution` is its status as executions
        name it.
        """
        task = await self._stored(task_id, owner)
        if task is None:
            task = Task(id=task_id, context_id=context_id, status=TaskStatus(state=SUBMITTED))
        archive_status(task)
        message = None
        if text:
            message = Message(
                message_id=new_id(), role=ROLE_AGENT, context_id=task.context_id, task_id=task_id
            )
            message.parts.append(Part(text=text))
        task.status.CopyFrom(TaskStatus(state=state, message=message))
        _stamp(task.status)
        if execution is not None:
            _mark(task, execution)
        await self._store(owner, task, runner=None)
        return task

    # -- reading and stopping ---------------------------------------------------------------------

    async def owner_of(self, task_id: str) -> str | None:
        """Who owns `task_id`, for an access decision (None when there is no such task)."""
        run = self.live.get(task_id)
        if run is not None:
            return run.owner
        cached = self.recent.get(task_id)
        if cached is not None:
            return cached[0]
        return await self.store.owner(task_id)

    async def get(self, task_id: str, owner: str) -> Task:
        run = self.live.get(task_id)
        if run is not None and run.owner == owner and run.visible is not None:
            return _copy(run.visible)
        task = await self._stored(task_id, owner)
        if task is None:
            raise TaskNotFoundError(f"task {task_id} not found")
        if self.fanout.shared and not _at_rest(task):  # another replica runs it: as its log says
            current, _ = _fold_log(await self.fanout.read(task_log(task_id)))
            if current is not None:
                return current
        return task

    async def follow(self, task_id: str, owner: str) -> AsyncIterator[Event] | None:
        """A task another replica is running: its current state, then its events as they come; None
        when no other replica runs it (see `watch` for this replica's own runs)."""
        if not self.fanout.shared or task_id in self.live:
            return None
        task = await self._stored(task_id, owner)
        if task is None or _at_rest(task):
            return None
        records = await self.fanout.read(task_log(task_id))
        current, position = _fold_log(records)
        # an empty log: the run was accepted (returnImmediately) and has not logged yet; its log is
        # followed from the start, after the task as stored
        return self._following(task_id, owner, current or task, position)

    async def _following(
        self, task_id: str, owner: str, current: Task, position: str
    ) -> AsyncIterator[Event]:
        yield current
        while True:
            async for record in self.fanout.tail(task_log(task_id), position, idle=FOLLOW_IDLE):
                position = record.position
                event = _event_of(record.data)
                yield event
                if _ends(event):
                    return
            stored = await self._stored(task_id, owner)  # quiet for a while: did it end elsewhere?
            if stored is None or _at_rest(stored):
                if stored is not None:
                    yield stored
                return

    async def list(self, request: ListTasksRequest, owner: str) -> ListTasksResponse:
        """Filtered and ordered on each task's current state: running tasks come from memory."""
        running = {
            run.task_id: _copy(run.visible)
            for run in list(self.live.values())
            if run.owner == owner and run.visible is not None
        }
        stored, total = await self.store.page(request, owner_context(owner), exclude=running.keys())
        return listing.merge(stored, total, running.values(), request)

    async def cancel(self, task_id: str, owner: str, reason: str = "canceled") -> Task:
        """Cancel the hop in flight (or a task waiting for input) and record CANCELED."""
        return await self._stop(task_id, owner, "canceled", reason)

    async def complete(self, task_id: str, owner: str, reason: str = "completed") -> Task:
        """End a task COMPLETED from outside (an admin completing an execution, a room archived)."""
        return await self._stop(task_id, owner, "completed", reason)

    async def _stop(self, task_id: str, owner: str, ending: str, reason: str) -> Task:
        run = self.live.get(task_id)
        if run is not None and run.owner == owner:
            run.ending, run.ending_reason = ending, reason
            run.scope.cancel()
            with anyio.move_on_after(STOP_GRACE):
                await run.done.wait()
            if run.error is not None:
                raise run.error
            return await self.get(task_id, owner)
        task = await self.get(task_id, owner)
        if task.status.state in TERMINAL:
            raise TaskNotCancelableError(f"task {task_id} already ended and cannot be {ending}")
        if self.fanout.shared and not _at_rest(task):  # another replica runs it: that one stops it
            stopped = await self._stop_elsewhere(task_id, owner, ending, reason)
            if stopped is not None:
                return stopped
            # no replica stopped it (the one running it is gone): it is recorded here
        state = CANCELED if ending == "canceled" else COMPLETED
        return await self.record(
            task_id, owner, state, reason, execution=ending if _execution(task) else None
        )

    async def _stop_elsewhere(self, task_id: str, owner: str, ending: str, reason: str) -> Task | None:
        """Ask the replica running the task to stop it; the task once it is stored ended, or None
        when it is not within STOP_GRACE."""
        request = {"kind": "stop", "task": task_id, "owner": owner, "ending": ending, "reason": reason}
        await self.fanout.publish(CONTROL, orjson.dumps(request))
        with anyio.move_on_after(STOP_GRACE):
            while True:
                stored = await self._stored(task_id, owner)
                if stored is not None and stored.status.state in TERMINAL:
                    return stored
                await anyio.sleep(STOP_POLL)
        return None

    async def hear_stops(self, *, task_status: AnyioTaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Stop the runs here that a CancelTask (or a completion) reaching another replica names,
        and hear which tasks got push configs there; until cancelled, started once it listens."""
        await hear(self.fanout, CONTROL, self._control, task_status=task_status)

    async def _control(self, data: bytes) -> None:
        try:
            request = orjson.loads(data)
            kind, task_id = request.get("kind", "stop"), str(request["task"])
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
            logger.warning("a task control message that is not one was ignored")
            return
        if kind == "push":
            if self.push is not None:
                self.push.store.changed_elsewhere(task_id)
            return
        self._stop_here(request)

    def _stop_here(self, request: dict[str, object]) -> None:
        run = self.live.get(str(request.get("task")))
        ending, owner = str(request.get("ending")), str(request.get("owner"))
        if run is not None and run.owner == owner and ending in ("canceled", "completed"):
            run.ending, run.ending_reason = ending, str(request.get("reason"))
            run.scope.cancel()

    def watch(self, task_id: str, owner: str) -> tuple[Run, MemoryObjectReceiveStream[Event]] | None:
        run = self.live.get(task_id)
        if run is None or run.owner != owner or run.task is None:
            return None
        return run, run.subscribe()

    async def stream(self, run: Run, receive: MemoryObjectReceiveStream[Event]) -> AsyncIterator[Event]:
        """The run's events up to its end; StoreUnavailable last when its task could not be stored."""
        try:
            async with receive:
                async for event in receive:
                    yield event
        finally:
            run.leave(receive)
        if run.error is not None:
            raise run.error

    # -- replicas that stopped ----------------------------------------------------------------------

    async def take_over(self, alive: set[str]) -> dict[str, Task]:
        """Fail the tasks a replica that is gone left running (SUBMITTED or WORKING under its name).

        A run lives in one process; once that process is gone nothing will finish its tasks, and a
        task must not look like it is working forever. Tasks no process of ours was running (an
        external agent's delivery) are left as they are. Each is claimed first, so when several
        replicas look at once, one of them takes it. Returns each failed task, by id.
        """
        states = [TaskState.Name(SUBMITTED), TaskState.Name(WORKING)]
        failed: dict[str, Task] = {}
        for task_id, owner, runner in await self.store.orphaned(states, alive):
            if not await self.store.claim(task_id, runner, self.runner):
                continue  # another replica took it
            task = await self.store.get(task_id, owner_context(owner))
            if task is None:
                continue
            text = (
                f"the server running this task (replica {runner}) stopped before it finished; send it again"
            )
            execution = "failed" if _execution(task) else None
            failed[task_id] = await self.record(task_id, owner, FAILED, text, execution=execution)
        if failed:
            logger.warning("failed %d task(s) that stopped replicas left running", len(failed))
        return failed


def _event_of(data: bytes) -> Event:
    """An event as a task's log holds it (a StreamResponse's encoding)."""
    response = StreamResponse.FromString(data)
    kind = response.WhichOneof("payload")
    event: Event = getattr(response, kind or "task")
    return event


def _fold_log(records: list[Record]) -> tuple[Task | None, str]:
    """The task a log's events add up to (from its newest snapshot), and the log's last position."""
    current: Task | None = None
    position = ""
    for record in records:
        position = record.position
        event = _event_of(record.data)
        if isinstance(event, Task):
            current = _copy(event)
        elif current is not None and not isinstance(event, Message):
            TaskFold(current.id, current).fold(event)
    return current, position


def _as_execution(event: Event) -> Event:
    """An event of a room execution's turn: its normal end leaves the execution ready, not completed."""
    if not isinstance(event, TaskStatusUpdateEvent | Task):
        return event
    status = event.status
    if status.state == COMPLETED and not _done(event):
        status.state = INPUT_REQUIRED
        _mark_metadata(event.metadata, READY)
    elif status.state == COMPLETED:
        _mark_metadata(event.metadata, "completed")
    elif status.state in INTERRUPTED:
        _mark_metadata(event.metadata, "input-required")
    elif status.state in TERMINAL:
        _mark_metadata(event.metadata, state_name(status.state))
    elif status.state == WORKING:
        _mark_metadata(event.metadata, "working")
    return event


def _done(event: TaskStatusUpdateEvent | Task) -> bool:
    """The agent marked its reply `ranch.done`: on the status message, or on the event itself."""
    for metadata in (event.status.message.metadata, event.metadata):
        value = metadata.fields.get(keys.DONE)
        if value is not None and value.WhichOneof("kind") == "bool_value" and value.bool_value:
            return True
    return False


def _mark_metadata(metadata: Struct, status: str) -> None:
    """`metadata["ranch.execution"].status = status`, keeping its other fields."""
    entry = metadata.fields[keys.EXECUTION]
    if entry.WhichOneof("kind") != "struct_value":
        entry.CopyFrom(Value(struct_value=Struct()))
    entry.struct_value.fields["status"].string_value = status


def _mark(task: Task, status: str) -> None:
    _mark_metadata(task.metadata, status)


def _execution(task: Task) -> bool:
    return keys.EXECUTION in task.metadata.fields


def _at_rest(task: Task) -> bool:
    """No process works on it: it ended, or it waits for input."""
    return task.status.state in TERMINAL or task.status.state in INTERRUPTED


def _copy(value: Proto) -> Proto:
    copy = type(value)()
    copy.CopyFrom(value)
    return copy


def _ends(event: Event) -> bool:
    """True when `event` may move its task to a final (terminal or interrupted) state."""
    if isinstance(event, TaskStatusUpdateEvent) or (isinstance(event, Task) and event.HasField("status")):
        return event.status.state in TERMINAL or event.status.state in INTERRUPTED
    return False


def _stamp(status: TaskStatus) -> None:
    if not status.HasField("timestamp"):
        now = Timestamp()
        now.FromNanoseconds(time.time_ns())
        status.timestamp.CopyFrom(now)


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
