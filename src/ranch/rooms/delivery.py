"""Running agents in rooms: one worker per (room, agent), messages handled in order.

Agents work concurrently across rooms; one agent in one room takes one message
at a time. The agent is shown the room history its `history_length` allows (a
context part before the message). A team's hops are posted as its members'
messages, each routing decision as a `routing.decided` event; an agent's tool
calls and results become `tool_call` / `tool_result` messages and its streamed
text `message.delta` events. A failure is posted as an error message and fails
the execution with the reason: the conversation goes on.
"""

from __future__ import annotations

import json
import logging
import re
from collections import deque
from contextlib import aclosing
from typing import Any

import anyio
from a2a.types import (
    Message,
    Part,
    Role,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
)
from anyio.abc import TaskGroup
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct
from sqlalchemy import select

from ranch.agents.base import Agent, Call, text_of
from ranch.agents.fold import Folder
from ranch.catalog.registry import Registry
from ranch.db.models import Delivery, Execution, Room, RoomMessage
from ranch.exceptions import AgentError, AgentNotFound, RanchError
from ranch.ids import new_id
from ranch.rooms import executions
from ranch.rooms.adapters import MESSAGE_KEY
from ranch.rooms.service import CHAIN_KEY, Rooms
from ranch.routing import context
from ranch.routing.router import HOP_KEY
from ranch.routing.team import Team
from ranch.wire import client_routing

logger = logging.getLogger(__name__)

MESSAGE_TYPE_KEY = "ranch.message_type"
"""Status-message metadata naming a room message type (tool_call, tool_result, thought)."""
TYPED = ("tool_call", "tool_result", "thought")
CONTEXT_TYPES = ("text", "error")
ROOM_HEADER = "[ranch] Room history (latest last):"


class Dispatcher:
    """Owns the workers; `wake` is called after a delivery is committed."""

    def __init__(self, rooms: Rooms, registry: Registry, group: TaskGroup) -> None:
        self.rooms = rooms
        self.bus = rooms.bus
        self.registry = registry
        self.group = group
        self._queues: dict[tuple[str, str], deque[str]] = {}
        self._running: dict[str, anyio.CancelScope] = {}
        """Execution id -> the scope of the job working for it, so a cancel stops the agent."""

    def wake(self, delivery: Delivery) -> None:
        key = (delivery.room_id, delivery.agent_id)
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = deque()
            self.group.start_soon(self._work, key)
        queue.append(delivery.id)

    def stop(self, execution_id: str) -> None:
        """Stop the agent working for a canceled (or completed) execution; its reply is never posted."""
        scope = self._running.get(execution_id)
        if scope is not None:
            scope.cancel()

    def busy(self) -> int:
        """Deliveries queued or in progress (tests and shutdown wait on it)."""
        return sum(len(queue) + 1 for queue in self._queues.values())

    async def _work(self, key: tuple[str, str]) -> None:
        queue = self._queues[key]
        try:
            while queue:
                delivery_id = queue.popleft()
                try:
                    await self._handle(delivery_id)
                except Exception:  # a bug here must not stop the room's next messages
                    logger.exception("delivery %s in room %s failed", delivery_id, key[0])
        finally:
            del self._queues[key]

    async def _handle(self, delivery_id: str) -> None:
        async with self.bus.transaction() as tx:
            delivery = await tx.session.get(Delivery, delivery_id)
            if delivery is None or delivery.status != "pending":
                return
            message = await tx.session.get(RoomMessage, delivery.message_seq)
            room = await tx.session.get(Room, delivery.room_id)
            if message is None or room is None or room.status != "active":
                delivery.status = "done"
                return
            delivery.status = "running"
            execution = await executions.current(tx, room.id, delivery.agent_id)
            await executions.move(tx, execution, "working")
        job = Job(self, room, message, execution)
        try:
            with anyio.CancelScope() as scope:
                self._running[execution.id] = scope
                await job.run()
        finally:
            self._running.pop(execution.id, None)
            async with self.bus.transaction() as tx:
                row = await tx.session.get(Delivery, delivery_id)
                if row is not None:
                    row.status = "done"


class Job:
    """One message handled by one agent (or team) in one room."""

    def __init__(
        self, dispatcher: Dispatcher, room: Room, message: RoomMessage, execution: Execution
    ) -> None:
        self.dispatcher = dispatcher
        self.bus = dispatcher.bus
        self.rooms = dispatcher.rooms
        self.room = room
        self.message = message
        self.execution = execution
        self.agent_id = execution.agent_id
        self.chain = int(message.meta.get(CHAIN_KEY, 0)) if message.sender_kind != "user" else 0
        self.last_member: str | None = None
        self.owner = f"room:{room.id}"
        """The room owns its conversation: whoever posts, the agents see one conversation per room."""

    async def run(self) -> None:
        try:
            agent = self.dispatcher.registry.get(self.agent_id)
        except AgentNotFound:
            await self.fail(f"agent '{self.agent_id}' is not available on this server")
            return
        try:
            incoming = await self.incoming(agent)
            with anyio.fail_after(agent.timeout):
                if isinstance(agent, Team):
                    await self.run_team(agent, incoming)
                else:
                    await self.run_agent(agent, incoming)
        except TimeoutError:
            await self.fail(f"agent '{self.agent_id}': no answer within its timeout of {agent.timeout:g}s")
        except RanchError as exc:
            await self.fail(str(exc))
        except Exception as exc:  # an agent's bug fails its execution, not the room
            logger.exception("agent %s failed in room %s", self.agent_id, self.room.id)
            await self.fail(f"agent '{self.agent_id}': {type(exc).__name__}: {exc}")

    async def incoming(self, agent: Agent) -> Message:
        """The A2A message the agent receives: room history (bounded), then the message."""
        limit = agent.history_length if agent.history_length is not None else context.DEFAULT_HISTORY_LENGTH
        rows: list[RoomMessage] = []
        if limit:
            async with self.bus.sessions() as session:
                found = await session.scalars(
                    select(RoomMessage)
                    .where(
                        RoomMessage.room_id == self.room.id,
                        RoomMessage.seq < self.message.seq,
                        RoomMessage.type.in_(CONTEXT_TYPES),
                    )
                    .order_by(RoomMessage.seq.desc())
                    .limit(limit)
                )
                rows = list(reversed(found.all()))
        entries = [context.Entry(row.sender_id, row.text) for row in rows]
        part = context.render(entries, header=ROOM_HEADER)
        message = Message(
            message_id=new_id(),
            role=Role.ROLE_USER,
            context_id=self.room.id,
            parts=([part] if part else []) + [Part(text=_addressed(self.message.text, self.agent_id))],
        )
        message.metadata.update(
            {
                MESSAGE_KEY: {
                    "id": self.message.id,
                    "cursor": self.message.seq,
                    "sender": {"kind": self.message.sender_kind, "id": self.message.sender_id},
                    "room": self.room.id,
                }
            }
        )
        return message

    # -- a single agent --------------------------------------------------------------------------

    async def run_agent(self, agent: Agent, incoming: Message) -> None:
        folder = Folder(self.agent_id)
        async with aclosing(agent.run(incoming, Call(owner=self.owner))) as events:
            async for event in events:
                if isinstance(event, TaskStatusUpdateEvent):
                    await self.typed_message(event)
                elif isinstance(event, TaskArtifactUpdateEvent):
                    self.delta(event)
                if folder.fold(event):
                    break
        outcome = folder.outcome()
        async with self.bus.transaction() as tx:
            if outcome.text:
                await self.rooms.write(
                    tx,
                    self.room,
                    "agent",
                    self.agent_id,
                    outcome.text,
                    execution_id=self.execution.id,
                    chain=self.chain + 1,
                )
            status = "input-required" if outcome.interrupted else "ready"
            await executions.move(tx, await self.fresh(tx, self.execution.id), status, turn=True)

    async def typed_message(self, event: TaskStatusUpdateEvent) -> None:
        """A tool call, tool result or thought reported while working becomes a room message."""
        if not event.status.HasField("message"):
            return
        status_message = event.status.message
        kind = _string(status_message.metadata, MESSAGE_TYPE_KEY)
        if kind not in TYPED:
            return
        data = [MessageToDict(part.data) for part in status_message.parts if part.HasField("data")]
        text = text_of(status_message) or (json.dumps(data[0], ensure_ascii=False) if data else "")
        metadata: dict[str, Any] = {"data": data[0]} if data else {}
        async with self.bus.transaction() as tx:
            await self.rooms.write(
                tx,
                self.room,
                "agent",
                self.agent_id,
                text,
                kind=kind,
                metadata=metadata,
                execution_id=self.execution.id,
                wake=False,
            )
            if kind == "tool_call" and data:
                row = await self.fresh(tx, self.execution.id)
                row.tool_calls = [*row.tool_calls, data[0]]

    def delta(self, event: TaskArtifactUpdateEvent) -> None:
        text = "".join(part.text for part in event.artifact.parts if part.HasField("text"))
        if text and not _has(event.artifact.metadata, HOP_KEY):
            self.bus.live(
                self.room.id,
                "message.delta",
                {
                    "execution_id": self.execution.id,
                    "agent": self.agent_id,
                    "text": text,
                    "append": event.append,
                },
            )

    # -- a team ------------------------------------------------------------------------------------

    async def run_team(self, team: Team, incoming: Message) -> None:
        async with aclosing(team.run(incoming, Call(owner=self.owner))) as events:
            async for event in events:
                if isinstance(event, TaskStatusUpdateEvent):
                    if await self.team_status(event):
                        return
                elif isinstance(event, TaskArtifactUpdateEvent):
                    await self.hop_reply(event)

    async def team_status(self, event: TaskStatusUpdateEvent) -> bool:
        """A member starts working, or the turn ends; True at the end."""
        state = event.status.state
        hop = (
            _struct_value(event.status.message.metadata, HOP_KEY)
            if event.status.HasField("message")
            else None
        )
        if state == TaskState.TASK_STATE_WORKING:
            if hop is not None:
                async with self.bus.transaction() as tx:
                    member = await executions.current(tx, self.room.id, str(hop["agent"]))
                    await executions.move(tx, member, "working")
            return False
        async with self.bus.transaction() as tx:
            row = await self.fresh(tx, self.execution.id)
            if state == TaskState.TASK_STATE_COMPLETED:
                await executions.move(tx, row, "ready", turn=True)
            elif state == TaskState.TASK_STATE_INPUT_REQUIRED:
                await executions.move(tx, row, "input-required", turn=True)
                if self.last_member:
                    member = await executions.current(tx, self.room.id, self.last_member)
                    await executions.move(tx, member, "input-required")
            else:
                reason = text_of(event.status.message) or TaskState.Name(state)
                error = _struct_value(event.metadata, client_routing.URI)
                failed_member = (
                    (error or {}).get("error", {}).get("agent") if isinstance(error, dict) else None
                )
                if failed_member:
                    member = await executions.current(tx, self.room.id, str(failed_member))
                    await executions.move(tx, member, "failed", reason)
                await self.rooms.write(
                    tx,
                    self.room,
                    "team",
                    self.agent_id,
                    reason,
                    kind="error",
                    execution_id=self.execution.id,
                    wake=False,
                )
                await executions.move(tx, row, "failed", reason, turn=True)
        return True

    async def hop_reply(self, event: TaskArtifactUpdateEvent) -> None:
        hop = _struct_value(event.artifact.metadata, HOP_KEY)
        if not isinstance(hop, dict):
            return
        member = str(hop.get("agent"))
        self.last_member = member
        text = "\n".join(part.text for part in event.artifact.parts if part.HasField("text"))
        async with self.bus.transaction() as tx:
            member_execution = await executions.current(tx, self.room.id, member)
            await self.rooms.write(
                tx,
                self.room,
                "agent",
                member,
                text,
                metadata={HOP_KEY: hop, "ranch.team": self.agent_id},
                execution_id=member_execution.id,
                wake=False,
            )
            await tx.emit(
                self.room.id,
                "routing.decided",
                {
                    "team": self.agent_id,
                    "execution_id": self.execution.id,
                    "agent": member,
                    "sender": hop.get("sender"),
                    "recipient": hop.get("recipient"),
                    "reason": hop.get("reason"),
                    "hop": int(hop.get("hop", 0)),
                    "ms": hop.get("ms"),
                },
            )
            await executions.move(tx, member_execution, "ready", turn=True)

    # -- shared ------------------------------------------------------------------------------------

    async def fail(self, reason: str) -> None:
        async with self.bus.transaction() as tx:
            await self.rooms.write(
                tx,
                self.room,
                "system",
                "ranch",
                f"[ranch] {reason}",
                kind="error",
                execution_id=self.execution.id,
                wake=False,
            )
            await executions.move(tx, await self.fresh(tx, self.execution.id), "failed", reason, turn=True)

    @staticmethod
    async def fresh(tx: Any, execution_id: str) -> Execution:
        row = await tx.session.get(Execution, execution_id)
        if row is None:  # pragma: no cover - executions are never deleted
            raise AgentError("ranch", f"execution {execution_id} vanished")
        return row  # type: ignore[no-any-return]


def _addressed(text: str, agent_id: str) -> str:
    """The text without the leading `@agent` that addressed it ("@helpdesk find x" -> "find x")."""
    stripped = re.sub(rf"^\s*@{re.escape(agent_id)}\b[\s,:]*", "", text)
    return stripped or text


def _has(struct: Struct, key: str) -> bool:
    return key in struct.fields


def _string(struct: Struct, key: str) -> str | None:
    value = struct.fields.get(key)
    return value.string_value if value is not None and value.HasField("string_value") else None


def _struct_value(struct: Struct, key: str) -> Any:
    if key not in struct.fields:
        return None
    return MessageToDict(struct).get(key)


async def recover(dispatcher: Dispatcher, external: set[str]) -> int:
    """On start: fail executions a stopped server left working; queue the deliveries still pending."""
    async with dispatcher.bus.transaction() as tx:
        pending = await executions.recover(tx, external)
    queued = 0
    for delivery in pending:
        if delivery.agent_id not in external:
            dispatcher.wake(delivery)
            queued += 1
    return queued
