"""Tasks across replicas: each run's events in a log other replicas follow, stops asked of the
replica running a task, and the tasks a stopped replica left running.

A run lives in one process. With `fanout.shared`, its events also go to a log per task (`task_log`),
so SubscribeToTask and GetTask on another replica read it as it runs; a CancelTask reaching another
replica is told to this one on the `CONTROL` topic; and the tasks of a replica that is gone are
claimed, one replica each, for the engine to fail.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping

import anyio
import orjson
from a2a.types import Message, Task, TaskState
from a2a.utils import proto_utils
from anyio.abc import TaskGroup
from anyio.abc import TaskStatus as AnyioTaskStatus

from ranch.agents.base import Event
from ranch.agents.fold import TaskFold, state_name
from ranch.fanout import Fanout, Record
from ranch.fanout.hearing import hear
from ranch.tasks.protos import at_rest, copy, ends, event_of
from ranch.tasks.push import CONTROL, PushNotifier
from ranch.tasks.run import Run
from ranch.tasks.saving import Saver
from ranch.tasks.store import owner_context
from ranch.wire.events import CANCELED, COMPLETED, SUBMITTED, TERMINAL, WORKING

logger = logging.getLogger(__name__)

STOP_GRACE = 10.0
"""Seconds a stop waits for the stopped run to store its final state."""
LOG_TTL = 3600.0
"""Seconds a task's log of events is kept after its last event (other replicas read it)."""
FOLLOW_IDLE = 30.0
"""Seconds a replica following another's run waits for its next event before it looks again."""
STOP_POLL = 0.05
"""Seconds between looks at a task another replica was asked to stop."""
ENDINGS = {state_name(state): state for state in (CANCELED, COMPLETED)}
"""How a stop from outside ends a task, as the stop request names it."""


def task_log(task_id: str) -> str:
    """The fan-out log of a task's events, which other replicas read."""
    return f"task:{task_id}"


def fold_log(records: list[Record]) -> tuple[Task | None, str]:
    """The task a log's events add up to (from its newest snapshot), and the log's last position."""
    current: Task | None = None
    position = ""
    for record in records:
        position = record.position
        event = event_of(record.data)
        if isinstance(event, Task):
            current = copy(event)
        elif current is not None and not isinstance(event, Message):
            TaskFold(current.id, current).fold(event)
    return current, position


class Replicas:
    """What the engine's runs tell other replicas, and what it hears from them."""

    def __init__(
        self,
        fanout: Fanout,
        saver: Saver,
        group: TaskGroup,
        live: Mapping[str, Run],
        push: PushNotifier | None = None,
    ) -> None:
        self.fanout = fanout
        self.saver = saver
        self.group = group
        self.live = live
        self.push = push

    # -- a run's log ---------------------------------------------------------------------------------

    def log(self, run: Run, event: Event) -> None:
        """Append `event` to the run's task log, behind the ones before it (one writer per run)."""
        if self.fanout.shared:
            run.logged.append(event)
            if len(run.logged) == 1:
                self.group.start_soon(self._write, run)

    def snapshot(self, run: Run) -> None:
        """A continued task's log starts with the task as it is (a follower folds from the newest)."""
        if run.task is not None:
            self.log(run, copy(run.task))

    async def _write(self, run: Run) -> None:
        while run.logged:
            event = run.logged[0]
            data = proto_utils.to_stream_response(event).SerializeToString()
            try:
                await self.fanout.append(task_log(run.task_id), data, ttl=LOG_TTL)
            except Exception:  # other replicas' subscribers miss it; this replica's do not
                logger.warning("could not log an event of task %s for replicas", run.task_id, exc_info=True)
            run.logged.pop(0)

    # -- a run on another replica -----------------------------------------------------------------------

    def elsewhere(self, task: Task) -> bool:
        """Whether another replica may be running `task` (it is not at rest, and replicas share)."""
        return self.fanout.shared and not at_rest(task)

    async def current(self, task_id: str) -> Task | None:
        """The task as its log says, when it has one."""
        current, _ = fold_log(await self.fanout.read(task_log(task_id)))
        return current

    async def follow(self, task: Task, owner: str) -> AsyncIterator[Event]:
        """A task another replica runs: its current state, then its events as they come."""
        current, position = fold_log(await self.fanout.read(task_log(task.id)))
        # an empty log: the run was accepted (returnImmediately) and has not logged yet; its log is
        # followed from the start, after the task as stored
        return self._following(task.id, owner, current or task, position)

    async def _following(
        self, task_id: str, owner: str, current: Task, position: str
    ) -> AsyncIterator[Event]:
        yield current
        while True:
            async for record in self.fanout.tail(task_log(task_id), position, idle=FOLLOW_IDLE):
                position = record.position
                event = event_of(record.data)
                yield event
                if ends(event):
                    return
            stored = await self.saver.stored(task_id, owner)  # quiet for a while: did it end elsewhere?
            if stored is None or at_rest(stored):
                if stored is not None:
                    yield stored
                return

    # -- stopping a run, wherever it is ----------------------------------------------------------------

    async def stop_elsewhere(self, task_id: str, owner: str, ending: TaskState, reason: str) -> Task | None:
        """Ask the replica running the task to stop it; the task once it is stored ended, or None
        when it is not within STOP_GRACE."""
        request = {
            "kind": "stop", "task": task_id, "owner": owner, "ending": state_name(ending), "reason": reason
        }  # fmt: skip
        await self.fanout.publish(CONTROL, orjson.dumps(request))
        with anyio.move_on_after(STOP_GRACE):
            while True:
                stored = await self.saver.stored(task_id, owner)
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
        ending, owner = ENDINGS.get(str(request.get("ending"))), str(request.get("owner"))
        if run is not None and run.owner == owner and ending is not None:
            run.stop(ending, str(request.get("reason")))

    # -- replicas that stopped ----------------------------------------------------------------------

    async def orphans(self, alive: set[str], runner: str) -> AsyncIterator[tuple[Task, str, str]]:
        """The tasks a replica that is gone left running (SUBMITTED or WORKING under its name), each
        claimed for `runner` first (when several replicas look at once, one of them takes it): the
        task, its owner and the replica that left it."""
        states = [TaskState.Name(SUBMITTED), TaskState.Name(WORKING)]
        for task_id, owner, gone in await self.saver.store.orphaned(states, alive):
            if not await self.saver.store.claim(task_id, gone, runner):
                continue  # another replica took it
            task = await self.saver.store.get(task_id, owner_context(owner))
            if task is not None:
                yield task, owner, gone
