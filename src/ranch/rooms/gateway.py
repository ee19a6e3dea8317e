"""A2A into rooms: a message whose contextId is a room id is posted into that room.

The message is posted as the A2A caller, addressed to the agent in the URL; the
answer is that agent's execution, as a Task, once the agent is done with the
message (docs/api.md, "Executions as A2A tasks"). GetTask and CancelTask also
reach executions by id.
"""

from __future__ import annotations

import anyio
from a2a.types import Message, Task
from a2a.utils.errors import InvalidParamsError, TaskNotCancelableError, TaskNotFoundError
from sqlalchemy import select

from ranch.agents.base import text_of
from ranch.db.models import Delivery, Execution, Participant, Room
from ranch.exceptions import AgentTimeout, NotFound
from ranch.identity.orgs import DEFAULT_ORG
from ranch.identity.principal import Principal
from ranch.rooms import executions
from ranch.rooms.access import visible_room
from ranch.rooms.adapters import BUSY, FINAL
from ranch.rooms.runtime import RoomsRuntime
from ranch.rooms.service import execution_task

SETTLE_MARGIN_S = 5.0
HANDLED_POLLS = 50
"""Checks, 20 ms apart, that the agent's delivery was closed after its last status update."""
"""Extra seconds past the agent's own timeout before the gateway stops waiting."""


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

    async def send(self, agent_id: str, message: Message, caller: str, wait_s: float) -> Task:
        bus = self.runtime.bus
        text = text_of(message)
        if not text.strip():
            raise InvalidParamsError("message.parts must hold text to post into a room")
        watcher = bus.watch()
        try:
            async with bus.transaction() as tx:
                room = await tx.session.get(Room, message.context_id)
                if room is None or room.status != "active":
                    raise InvalidParamsError(f"room '{message.context_id}' is not open")
                member = await tx.session.get(
                    Participant, (room.id, "agent", agent_id)
                ) or await tx.session.get(Participant, (room.id, "team", agent_id))
                if member is None:
                    raise InvalidParamsError(f"agent '{agent_id}' is not a participant of room '{room.id}'")
                bus.follow(watcher, room.id)
                posted = await self.runtime.rooms.write(
                    tx,
                    room,
                    "user",
                    caller,
                    text,
                    mentions=[agent_id],
                    metadata={"a2a": {"messageId": message.message_id}},
                )
            try:
                with anyio.fail_after(wait_s + SETTLE_MARGIN_S):
                    async for payload in watcher.receive:
                        data = payload.get("data") or {}
                        if (
                            payload["type"] == "execution.updated"
                            and data.get("agent_id") == agent_id
                            and data.get("status") not in BUSY
                            and await self._handled(posted.seq, agent_id)
                        ):
                            return await self.task(str(data["id"]), None)
            except TimeoutError:
                raise AgentTimeout(agent_id, wait_s + SETTLE_MARGIN_S) from None
        finally:
            bus.unwatch(watcher)
        raise TaskNotFoundError(f"the room closed before agent '{agent_id}' answered")  # pragma: no cover

    async def _handled(self, message_seq: int, agent_id: str) -> bool:
        """Whether the agent is done with this message (not an earlier one it was still answering).

        Its delivery is closed just after its execution's last update, so wait for that briefly.
        """
        for _ in range(HANDLED_POLLS):
            async with self.runtime.sessions() as session:
                status = await session.scalar(
                    select(Delivery.status).where(
                        Delivery.message_seq == message_seq, Delivery.agent_id == agent_id
                    )
                )
            if status == "done":
                return True
            if status == "pending":
                return False  # an earlier message's turn ended; this one has not started
            await anyio.sleep(0.02)
        return False

    async def find(self, execution_id: str) -> Execution | None:
        async with self.runtime.sessions() as session:
            return await session.get(Execution, execution_id)

    async def task(self, execution_id: str, history_length: int | None) -> Task:
        async with self.runtime.sessions() as session:
            row = await session.get(Execution, execution_id)
            if row is None:
                raise TaskNotFoundError(f"no task '{execution_id}'")
            return await execution_task(session, row, history_length)

    async def cancel(self, execution_id: str) -> Task:
        async with self.runtime.bus.transaction() as tx:
            row = await tx.session.get(Execution, execution_id)
            if row is None:
                raise TaskNotFoundError(f"no task '{execution_id}'")
            if row.status in FINAL:
                raise TaskNotCancelableError(f"task '{execution_id}' already ended ({row.status})")
            await executions.move(tx, row, "canceled", "canceled over A2A")
        self.runtime.dispatcher.stop(execution_id)
        return await self.task(execution_id, None)
