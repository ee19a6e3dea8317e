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
from ranch.db.models import AgentRecord, Execution, Participant, Room
from ranch.exceptions import NotFound
from ranch.rooms import executions
from ranch.rooms.access import Principal, visible_room
from ranch.rooms.adapters import BUSY, FINAL, to_task
from ranch.rooms.runtime import RoomsRuntime
from ranch.rooms.service import execution_history

SETTLE_MARGIN_S = 5.0
"""Extra seconds past the agent's own timeout before the gateway stops waiting."""


class Gateway:
    def __init__(self, runtime: RoomsRuntime) -> None:
        self.runtime = runtime

    def is_room(self, context_id: str) -> bool:
        return context_id in self.runtime.rooms.known

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
            with anyio.fail_after(wait_s + SETTLE_MARGIN_S):
                async for payload in watcher.receive:
                    data = payload.get("data") or {}
                    if (
                        payload["type"] == "execution.updated"
                        and data.get("agent_id") == agent_id
                        and data.get("status") not in BUSY
                        and (payload.get("cursor") or 0) > posted.seq
                    ):
                        return await self.task(str(data["id"]), None)
        finally:
            bus.unwatch(watcher)
        raise TaskNotFoundError(f"the room closed before agent '{agent_id}' answered")  # pragma: no cover

    async def find(self, execution_id: str) -> Execution | None:
        async with self.runtime.sessions() as session:
            return await session.get(Execution, execution_id)

    async def task(self, execution_id: str, history_length: int | None) -> Task:
        async with self.runtime.sessions() as session:
            row = await session.get(Execution, execution_id)
            if row is None:
                raise TaskNotFoundError(f"no task '{execution_id}'")
            limit = history_length
            if limit is None:
                limit = await session.scalar(
                    select(AgentRecord.history_length).where(AgentRecord.id == row.agent_id)
                )
            return to_task(row, await execution_history(session, row), limit)

    async def cancel(self, execution_id: str) -> Task:
        async with self.runtime.bus.transaction() as tx:
            row = await tx.session.get(Execution, execution_id)
            if row is None:
                raise TaskNotFoundError(f"no task '{execution_id}'")
            if row.status in FINAL:
                raise TaskNotCancelableError(f"task '{execution_id}' already ended ({row.status})")
            await executions.move(tx, row, "canceled", "canceled over A2A")
        return await self.task(execution_id, None)
