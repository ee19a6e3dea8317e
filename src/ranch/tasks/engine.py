"""The task engine: every A2A task ranch serves, and every room execution, runs here.

One `Run` drives one agent call for one task inside the app's task group, so a caller
that disconnects does not stop the work: `invoke` gives the call its timeout and error
rules, `TaskFold` folds its events into the task, subscribers and webhooks hear them, a
`RunSink` (a room's) sees them in order, and the task is stored when it is created and
when it settles (terminal, or waiting for input). Nobody hears of a task, or of its final
state, before it is stored: when the store fails, callers get `StoreUnavailable`.

A direct `Message` reply to a new task is returned as is: no task is created for it.

What is not running a task lives beside it: storing with retries (`tasks.saving`), replicas
(`tasks.replicas`: the log other replicas follow, stops, takeovers), long-lived runs
(`tasks.lifetimes`: a room execution's turns, whose statuses the room's `Lifetime` names),
the proto helpers (`tasks.protos`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
from a2a.types import (
    ListTasksRequest,
    ListTasksResponse,
    Message,
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
from anyio.abc import TaskStatus as AnyioTaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream

from ranch.agents.base import Agent, Call, Event
from ranch.agents.fold import TaskFold, archive_status, state_name
from ranch.agents.invoke import invoke
from ranch.exceptions import RanchError, StoreUnavailable
from ranch.fanout import Fanout, MemoryFanout
from ranch.ids import new_id
from ranch.observe import metrics
from ranch.tasks import lifetimes, listing
from ranch.tasks.lifetimes import Lifetime
from ranch.tasks.protos import agent_text, at_rest, copy, ends, stamp, status_event
from ranch.tasks.push import PushNotifier
from ranch.tasks.replicas import STOP_GRACE, Replicas, task_log
from ranch.tasks.run import RecentTasks, Run, RunSink
from ranch.tasks.saving import Saver
from ranch.tasks.store import SqlTaskStore, owner_context
from ranch.wire import keys
from ranch.wire.events import (
    CANCELED,
    COMPLETED,
    FAILED,
    INTERRUPTED,
    SUBMITTED,
    TERMINAL,
    WORKING,
)

__all__ = ["Resumer", "TaskEngine", "task_log"]

Resumer = Callable[[Task, str], Awaitable[bool]]
"""Goes on with a task a stopped replica left running (`TaskEngine.resume`); False: it cannot."""

logger = logging.getLogger(__name__)


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
        """Webhook deliveries; consulted per event only for tasks that have a push config."""
        self.runner = runner or new_id()
        """This process, as stored with the tasks it is running (a restart fails what it left running)."""
        self.live: dict[str, Run] = {}
        self.saver = Saver(store)
        self.replicas = Replicas(fanout or MemoryFanout(), self.saver, group, self.live, push)
        """Where a run's events also go when other replicas must see them (`fanout.shared`): a log per
        task, which SubscribeToTask and GetTask on another replica read (`follow`, `get`)."""

    @property
    def recent(self) -> RecentTasks:
        """Tasks stored lately, by id, with their owner: GetTask right after a turn skips the database."""
        return self.saver.recent

    @property
    def fanout(self) -> Fanout:
        return self.replicas.fanout

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
        lifetime: Lifetime | None = None,
        sink: RunSink | None = None,
    ) -> Run:
        """Create or continue the task `message` belongs to and start the agent on it.

        `task_id` names the task to continue, or to create when it does not exist yet (a room
        execution's). A `push_config` sent with the message is stored before the agent starts,
        so its webhook hears every update. With `submit` (returnImmediately), the task is stored
        before the agent starts, so `run.task` is there to answer with at once, whatever the
        agent does first (a team may wait for another turn of the same context). A `lifetime` makes
        the run one turn of a long-lived task (`tasks.lifetimes`), shaped by it.
        """
        run = await self._prepare(message, owner, task_id, lifetime)
        run.sink = sink
        message.context_id, message.task_id = run.context_id, run.task_id
        if push_config is not None and self.push is not None:
            await self.push.store.set_info(run.task_id, push_config, owner_context(owner))
        if submit or run.long_lived:
            await self._submit(run, message)
        self.replicas.snapshot(run)
        self.live[run.task_id] = run
        self.group.start_soon(self._drive, run, agent, message, call)
        return run

    async def resume(
        self,
        agent: Agent,
        task: Task,
        owner: str,
        message: Message,
        call: Call,
        *,
        lifetime: Lifetime | None = None,
        sink: RunSink | None = None,
    ) -> Run:
        """Go on with `task`, which a stopped replica was running and this one claimed: `agent` (a
        team resuming its turn from its checkpoint) continues it as the same task, its events told as
        any run's (`message` is the one the task answers; a room execution's turn has its `lifetime`
        and `sink` again). With replicas, the task is taken as its log says (what it had told before
        the stop), and the log goes on behind."""
        if self.fanout.shared:
            task = await self.replicas.current(task.id) or task
        run = Run(
            task_id=task.id, context_id=task.context_id, owner=owner, task=task, lifetime=lifetime, sink=sink
        )
        self.live[run.task_id] = run
        self.group.start_soon(self._drive, run, agent, message, call)
        return run

    async def _prepare(
        self, message: Message, owner: str, task_id: str | None, lifetime: Lifetime | None
    ) -> Run:
        wanted = task_id or message.task_id
        if not wanted:
            context_id = message.context_id or new_id()
            return Run(task_id=new_id(), context_id=context_id, owner=owner, task=None)
        running = self.live.get(wanted)
        if running is not None and running.owner == owner:
            raise UnsupportedOperationError(f"task {wanted} is still working; wait for it or cancel it")
        task = await self.saver.stored(wanted, owner)
        if task is None and task_id is not None and await self.store.owner(task_id) is None:
            # a room execution's first turn
            return Run(
                task_id=task_id, context_id=message.context_id, owner=owner, task=None, lifetime=lifetime
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
        if lifetime is not None:
            lifetimes.new_turn(task)
        else:
            task.history.append(message)
        return Run(task_id=task.id, context_id=task.context_id, owner=owner, task=task, lifetime=lifetime)

    async def _submit(self, run: Run, message: Message) -> None:
        """Store the task before the agent starts: SUBMITTED when new, WORKING when continued."""
        if run.task is None:
            await self._ensure_task(run, copy(message))
            if run.lifetime is None:
                return
        assert run.task is not None
        task = copy(run.task)
        archive_status(task)
        task.status.CopyFrom(TaskStatus(state=WORKING))
        stamp(task.status)
        if run.lifetime is not None:
            del task.history[:]
            run.lifetime.begin(task)
        await self._save(run, task)
        run.task = task

    async def _drive(self, run: Run, agent: Agent, message: Message, call: Call) -> None:
        incoming = copy(message)
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
        self._push(run, event)
        self._tell(run, event)

    def _push(self, run: Run, event: Event) -> bool:
        """Queue `event` for the task's webhooks; whether it has any."""
        if self.push is None or not self.push.wants(run.task_id):
            return False
        self.push.notify(run.task_id, event)
        return True

    def _tell(self, run: Run, event: Event) -> None:
        run.publish(event)
        self.replicas.log(run, event)

    async def _apply(self, run: Run, event: Event, incoming: Message) -> bool:
        """Fold one event into the run; True when the agent's answer is complete.

        The event that completes it is held back (`run.held`) until `_settle` has stored it.
        """
        if isinstance(event, Message):
            return await self._apply_message(run, event, incoming)
        task = await self._ensure_task(run, incoming)
        if run.lifetime is not None and isinstance(event, TaskStatusUpdateEvent | Task):
            run.lifetime.shape(event)
        if ends(event) and run.shown is None:
            run.shown = copy(task)
        if isinstance(event, TaskStatusUpdateEvent | TaskArtifactUpdateEvent):
            event.task_id, event.context_id = run.task_id, run.context_id
        was = task.status.state
        final = TaskFold(run.task_id, task).fold(event)
        if self.fanout.shared and was != WORKING and task.status.state == WORKING:
            await self._save(run, task)  # ListTasks on another replica filters on the stored state
        if isinstance(event, Task | TaskStatusUpdateEvent):
            stamp(task.status)
        if run.long_lived:
            del task.history[:]  # a long-lived task keeps no history
        if isinstance(event, Task):
            event = copy(task)
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
            await self._apply(run, lifetimes.reply_artifact(run.task_id, run.context_id, message), incoming)
        await self._apply(run, status_event(run.task_id, run.context_id, COMPLETED, message), incoming)
        return True

    async def _ensure_task(self, run: Run, incoming: Message) -> Task:
        if run.task is None:
            history = [] if run.long_lived else [incoming]
            task = Task(id=run.task_id, context_id=run.context_id, history=history)
            task.status.state = SUBMITTED
            stamp(task.status)
            await self._save(run, task)  # stored before anyone is told it exists
            run.task = task
            self._publish(run, copy(task))
        return run.task

    async def _settle(self, run: Run, incoming: Message, error: str | None) -> None:
        if run.task is None and run.reply is not None:
            if run.sink is not None:
                await run.sink.settled(run)
            return
        task = await self._ensure_task(run, incoming)
        if run.ending is not None:
            ended = agent_text(run.task_id, run.context_id, run.ending_reason or state_name(run.ending))
            ended.metadata.fields[
                keys.DONE
            ].bool_value = True  # a long-lived task ended from outside stays ended
            await self._apply(run, status_event(run.task_id, run.context_id, run.ending, ended), incoming)
        elif error is not None or task.status.state not in TERMINAL | INTERRUPTED:
            why = error if error is not None else "the agent stopped before its task reached a final state"
            failed = status_event(
                run.task_id, run.context_id, FAILED, agent_text(run.task_id, run.context_id, why)
            )
            await self._apply(run, failed, incoming)
        await self._save(run, task)  # raises StoreUnavailable: the held event is never told
        run.shown = None
        if run.sink is not None:
            try:
                await run.sink.settled(run)
            except Exception:  # the task is stored; the sink's failure is logged, not the caller's
                logger.exception("the sink of task %s failed to settle", run.task_id)
        if run.held is not None:
            if self._push(run, run.held) and self.push is not None:
                await self.push.held(run.task_id)  # the end is told once its webhook updates are safe
            self._tell(run, run.held)

    async def _save(self, run: Run, task: Task) -> None:
        await self.saver.save(run.owner, task, runner=None if at_rest(task) else self.runner)

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
        name it, marked on the task (`tasks.lifetimes.mark`).
        """
        task = await self.saver.stored(task_id, owner)
        if task is None:
            task = Task(id=task_id, context_id=context_id, status=TaskStatus(state=SUBMITTED))
        archive_status(task)
        message = agent_text(task_id, task.context_id, text) if text else None
        task.status.CopyFrom(TaskStatus(state=state, message=message))
        stamp(task.status)
        if execution is not None:
            lifetimes.mark(task.metadata, execution)
        await self.saver.save(owner, task)
        return task

    async def _record_end(self, task: Task, owner: str, state: TaskState, text: str) -> Task:
        """`record` an end the engine decides itself; a marked task's mark names the state."""
        execution = state_name(state) if lifetimes.marked(task) else None
        return await self.record(task.id, owner, state, text, execution=execution)

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
            return copy(run.visible)
        task = await self.saver.stored(task_id, owner)
        if task is None:
            raise TaskNotFoundError(f"task {task_id} not found")
        if self.replicas.elsewhere(task):  # another replica runs it: as its log says
            current = await self.replicas.current(task_id)
            if current is not None:
                return current
        return task

    async def follow(self, task_id: str, owner: str) -> AsyncIterator[Event] | None:
        """A task another replica is running: its current state, then its events as they come; None
        when no other replica runs it (see `watch` for this replica's own runs)."""
        if not self.fanout.shared or task_id in self.live:
            return None
        task = await self.saver.stored(task_id, owner)
        if task is None or at_rest(task):
            return None
        return await self.replicas.follow(task, owner)

    async def list(self, request: ListTasksRequest, owner: str) -> ListTasksResponse:
        """Filtered and ordered on each task's current state: running tasks come from memory."""
        running = {
            run.task_id: copy(run.visible)
            for run in list(self.live.values())
            if run.owner == owner and run.visible is not None
        }
        stored, total = await self.store.page(request, owner_context(owner), exclude=running.keys())
        return listing.merge(stored, total, running.values(), request)

    async def cancel(self, task_id: str, owner: str, reason: str = "canceled") -> Task:
        """Cancel the hop in flight (or a task waiting for input) and record CANCELED."""
        return await self._stop(task_id, owner, CANCELED, reason)

    async def complete(self, task_id: str, owner: str, reason: str = "completed") -> Task:
        """End a task COMPLETED from outside (an admin completing an execution, a room archived)."""
        return await self._stop(task_id, owner, COMPLETED, reason)

    async def _stop(self, task_id: str, owner: str, ending: TaskState, reason: str) -> Task:
        run = self.live.get(task_id)
        if run is not None and run.owner == owner:
            run.stop(ending, reason)
            with anyio.move_on_after(STOP_GRACE):
                await run.done.wait()
            if run.error is not None:
                raise run.error
            return await self.get(task_id, owner)
        task = await self.get(task_id, owner)
        if task.status.state in TERMINAL:
            raise TaskNotCancelableError(f"task {task_id} already ended and cannot be {state_name(ending)}")
        if self.replicas.elsewhere(task):  # another replica runs it: that one stops it
            stopped = await self.replicas.stop_elsewhere(task_id, owner, ending, reason)
            if stopped is not None:
                return stopped
            # no replica stopped it (the one running it is gone): it is recorded here
        return await self._record_end(task, owner, ending, reason)

    async def hear_stops(self, *, task_status: AnyioTaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Stop the runs here that a CancelTask (or a completion) reaching another replica names,
        and hear which tasks got push configs there; until cancelled, started once it listens."""
        await self.replicas.hear_stops(task_status=task_status)

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

    async def take_over(self, alive: set[str], resume: Resumer | None = None) -> dict[str, Task]:
        """Resume or fail the tasks a replica that is gone left running (SUBMITTED or WORKING under
        its name).

        A run lives in one process; once that process is gone nothing else finishes its tasks, and a
        task must not look like it is working forever. `resume` goes on with those it can (a team
        turn with a checkpoint: True once started here); the others fail. Tasks no process of ours was
        running (an external agent's delivery) are left as they are. Returns each failed task, by id.
        """
        failed: dict[str, Task] = {}
        resumed = 0
        async for task, owner, gone in self.replicas.orphans(alive, self.runner):
            if resume is not None and await self._resumed(resume, task, owner):
                resumed += 1
                continue
            failed[task.id] = await self.fail_taken_over(task, owner, gone)
        if resumed:
            logger.warning("resumed %d task(s) that stopped replicas left running", resumed)
        if failed:
            logger.warning("failed %d task(s) that stopped replicas left running", len(failed))
        return failed

    async def fail_taken_over(self, task: Task, owner: str, gone: str = "") -> Task:
        """End FAILED a task taken over from a replica that stopped (`gone`), which cannot go on here."""
        replica = f" (replica {gone})" if gone else ""
        text = f"the server running this task{replica} stopped before it finished; send it again"
        return await self._record_end(task, owner, FAILED, text)

    async def _resumed(self, resume: Resumer, task: Task, owner: str) -> bool:
        try:
            return await resume(task, owner)
        except Exception:  # its checkpoint could not be read or used: the task fails as before
            logger.warning("could not resume task %s", task.id, exc_info=True)
            return False
