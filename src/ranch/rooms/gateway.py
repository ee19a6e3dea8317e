"""A2A into rooms: a message whose contextId is a room id is posted into that room.

The message is posted as the A2A caller, addressed to the agent in the URL; the answer is
that agent's execution, as a Task, once its turn on this message is over (or, streaming, the
turn's events as they happen). The gateway waits on the delivery's own watch: no polling.
GetTask, CancelTask, SubscribeToTask and push configs reach executions through the task
engine, since an execution is a task owned by its room (hub/serving.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
from a2a.types import Message, Task
from a2a.utils.errors import InvalidParamsError, TaskNotCancelableError
from sqlalchemy import select

from ranch.agents.base import Event, content_parts
from ranch.db.models import Execution, ExecutionStatus, Participant, Room, RoomStatus
from ranch.exceptions import AgentTimeout, NotFound
from ranch.identity.orgs import DEFAULT_ORG
from ranch.identity.principal import Principal
from ranch.rooms import executions
from ranch.rooms.access import visible_room
from ranch.rooms.delivery import DeliveryWatch
from ranch.rooms.runtime import RoomsRuntime

SETTLE_MARGIN_S = 5.0
"""Extra seconds past the agent's own timeout before the gateway stops waiting for its turn."""


class Gateway:
    def __init__(self, runtime: RoomsRuntime) -> None:
        self.runtime = runtime

    def is_room(self, context_id: str) -> bool:
        return context_id in self.runtime.rooms.known

    def is_open_room(self, context_id: str) -> bool:
        """A room callers without a key may use: the default organization's (a server without auth)."""
        return self.runtime.rooms.known.get(context_id) == DEFAULT_ORG

    async def room_visible(self, principal: Principal, room_id: str) -> bool:
        """Whether the caller may see the room (the REST API's rule; another tenant's rooms never)."""
        async with self.runtime.sessions() as session:
            try:
                await visible_room(session, principal, room_id)
            except NotFound:
                return False
        return True

    async def may_use(self, principal: Principal | None, room_id: str) -> bool:
        """Whether an A2A caller may use the room: without a key, only the default organization's."""
        if principal is None:
            return self.is_open_room(room_id)
        return self.is_room(room_id) and await self.room_visible(principal, room_id)

    async def send(self, agent_id: str, message: Message, caller: str, wait_s: float) -> Task:
        """Post, wait for the agent's turn on it to end, answer with its execution."""
        watch, execution_id = await self._post(agent_id, message, caller)
        await self._turn_over(agent_id, watch, execution_id, wait_s)
        return await self.task(execution_id, None)

    async def stream(
        self, agent_id: str, message: Message, caller: str, wait_s: float
    ) -> AsyncIterator[Event]:
        """Post, then the execution as a Task, the turn's events as they happen, and the execution again."""
        watch, execution_id = await self._post(agent_id, message, caller, stream=True)
        yield await self.task(execution_id, None)
        if watch is not None:
            with anyio.fail_after(wait_s + SETTLE_MARGIN_S):
                await watch.started.wait()
            if watch.run is not None and watch.events is not None:
                async for event in self.runtime.writer.tasks.stream(watch.run, watch.events):
                    if not isinstance(event, Task):
                        yield event
        else:
            await self._turn_over(agent_id, watch, execution_id, wait_s)
        yield await self.task(execution_id, None)

    async def _post(
        self, agent_id: str, message: Message, caller: str, *, stream: bool = False
    ) -> tuple[DeliveryWatch | None, str]:
        """Post the message into its room addressed to `agent_id`: the delivery's watch, the execution."""
        parts = content_parts(message)  # every part (the A2A entry checked them): text, files, data
        if not parts:
            raise InvalidParamsError("message.parts must hold content to post into a room")
        writer = self.runtime.writer
        async with self.runtime.bus.transaction(message.context_id) as tx:
            room = await tx.session.get(Room, message.context_id)
            if room is None or room.status != RoomStatus.ACTIVE:
                raise InvalidParamsError(f"room '{message.context_id}' is not open")
            member = await tx.session.get(Participant, (room.id, "agent", agent_id)) or await tx.session.get(
                Participant, (room.id, "team", agent_id)
            )
            if member is None:
                raise InvalidParamsError(f"agent '{agent_id}' is not a participant of room '{room.id}'")
            await writer.write(
                tx,
                room,
                "user",
                caller,
                parts=parts,
                mentions=[agent_id],
                metadata={"a2a": {"messageId": message.message_id}},
            )
            execution = await executions.current(tx, room.id, agent_id)
            delivery = next((d for d in tx.deliveries if d.agent_id == agent_id), None)
        watch = self.runtime.dispatcher.watch(delivery.id) if delivery is not None else None
        if watch is not None:
            watch.wants_events = stream
        return watch, execution.id

    async def _turn_over(
        self, agent_id: str, watch: DeliveryWatch | None, execution_id: str, wait_s: float
    ) -> None:
        """Until the agent's turn on the posted message is over (an external agent's: its reply)."""
        try:
            with anyio.fail_after(wait_s + SETTLE_MARGIN_S):
                if watch is not None:
                    await watch.handled.wait()
                else:
                    await self._external_reply(execution_id)
        except TimeoutError:
            raise AgentTimeout(agent_id, wait_s + SETTLE_MARGIN_S) from None

    async def _external_reply(self, execution_id: str) -> None:
        """An external agent answers over the API: wait for its execution to leave `working`."""
        bus = self.runtime.bus
        watcher = bus.watch()
        try:
            async with self.runtime.sessions() as session:
                room_id = await session.scalar(select(Execution.room_id).where(Execution.id == execution_id))
            if room_id is None:
                return
            await bus.follow(watcher, room_id)  # then its status: a change in between is not missed
            async with self.runtime.sessions() as session:
                row = await session.get(Execution, execution_id)
                if row is None or row.status not in executions.BUSY:
                    return
            async for payload in watcher.receive:
                data = payload.get("data") or {}
                if (
                    payload["type"] == "execution.updated"
                    and data.get("id") == execution_id
                    and data.get("status") not in executions.BUSY
                ):
                    return
        finally:
            bus.unwatch(watcher)

    async def find(self, execution_id: str) -> Execution | None:
        async with self.runtime.sessions() as session:
            return await session.get(Execution, execution_id)

    async def task(self, execution_id: str, history_length: int | None) -> Task:
        """The execution as clients read it (rooms/adapters.py)."""
        row = await self.find(execution_id)
        if row is None:
            raise NotFound(f"no execution '{execution_id}'", "taskId")
        return await self.runtime.executions.execution_task(row, history_length)

    async def cancel(self, execution_id: str, canceler: str) -> Task:
        """CancelTask on an execution: the room's own cancel (its agent stopped, its row following)."""
        row = await self.find(execution_id)
        if row is None:
            raise NotFound(f"no execution '{execution_id}'", "taskId")
        if row.status in executions.FINAL:
            raise TaskNotCancelableError(f"task '{execution_id}' already ended ({row.status})")
        await self.runtime.executions.end(row, ExecutionStatus.CANCELED, f"canceled over A2A by {canceler}")
        return await self.task(execution_id, None)
