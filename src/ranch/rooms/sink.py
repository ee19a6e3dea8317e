"""What a run in a room leaves in the room: the engine's events as messages, states and live text.

A `RoomSink` is told of every event of one execution's turn as the task engine folds it,
and of the turn's end once the task is stored; it writes what people in the room see:

- a team's hops: each member's reply as that member's message, a `routing.decided` event,
  the member's own execution working then ready (its task recorded by the engine too);
- an agent's tool calls, tool results and thoughts (status messages it reports while
  working) as `tool_call` / `tool_result` / `thought` messages;
- streamed text (artifact updates that are not a hop's reply) as live `message.delta`s;
- at the end: the agent's reply as its message, or the error that ended the turn, and the
  execution's row brought in line with its task; or, when the reply hands the work to another
  agent of the room (`metadata[client-routing].handoff`), the handoff (rooms/writing.py).
"""

from __future__ import annotations

import json
import logging
from functools import partial
from typing import Any

from a2a.types import Part, Task, TaskArtifactUpdateEvent, TaskState, TaskStatusUpdateEvent
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct

from ranch.agents.base import Event, text_of
from ranch.agents.fold import reply_parts
from ranch.db.models import Execution, ExecutionStatus, Room, RoomMessage
from ranch.exceptions import Conflict, InvalidInput
from ranch.observe import tracing
from ranch.policy.logs import TRACE_ID
from ranch.rooms import executions
from ranch.rooms.bus import NewMessage, Tx
from ranch.rooms.writing import MessageWriter
from ranch.tasks.run import Run
from ranch.wire import client_routing, keys
from ranch.wire.events import COMPLETED, FAILED, INPUT_REQUIRED, UNSUCCESSFUL, WORKING

logger = logging.getLogger(__name__)

TYPED = ("tool_call", "tool_result", "thought")


class RoomSink:
    """The room side of one execution's turn (see the module docstring)."""

    def __init__(
        self, writer: MessageWriter, room: Room, message: RoomMessage, execution: Execution, *, team: bool
    ) -> None:
        self.writer = writer
        self.bus = writer.bus
        self.room = room
        self.message = message
        self.execution = execution
        self.agent_id = execution.agent_id
        self.team = team
        self.chain = int(message.meta.get(keys.CHAIN, 0)) if message.sender_kind != "user" else 0
        self.last_member: str | None = None
        self.member_executions: dict[str, str] = {}
        """A team's members' executions in the room, for their streamed text."""

    # -- as the engine folds each event ------------------------------------------------------------

    async def event(self, run: Run, event: Event) -> None:
        if isinstance(event, TaskStatusUpdateEvent):
            if self.team:
                await self._member_working(event)
            else:
                await self._typed_message(event)
        elif isinstance(event, TaskArtifactUpdateEvent):
            if _struct_value(event.artifact.metadata, keys.HOP) is not None:
                await self._hop_reply(event)
            else:
                self._delta(event)

    async def _member_working(self, event: TaskStatusUpdateEvent) -> None:
        """A team's hop starts: its member's execution is working."""
        if event.status.state != WORKING or not event.status.HasField("message"):
            return
        hop = _struct_value(event.status.message.metadata, keys.HOP)
        if isinstance(hop, dict):
            await self._member(str(hop["agent"]), WORKING, ExecutionStatus.WORKING)

    async def _member(
        self, member: str, state: TaskState, status: str, reason: str = "", *, turn: bool = False
    ) -> None:
        """A team member's own execution in the room moves (its task recorded, its row following)."""
        async with self.bus.transaction(self.room.id) as tx:
            row = await executions.current(tx, self.room.id, member)
        self.member_executions[member] = row.id
        task = await self.writer.tasks.record(
            row.id, executions.owner(self.room.id), state, reason, context_id=self.room.id, execution=status
        )
        async with self.bus.transaction(self.room.id) as tx:
            fresh = await executions.fresh(tx, row.id)
            if fresh is not None:
                await executions.project(tx, fresh, task, turn=turn)

    async def _typed_message(self, event: TaskStatusUpdateEvent) -> None:
        """A tool call, tool result or thought reported while working becomes a room message."""
        if not event.status.HasField("message"):
            return
        status_message = event.status.message
        kind = _string(status_message.metadata, keys.MESSAGE_TYPE)
        if kind not in TYPED:
            return
        data = [MessageToDict(part.data) for part in status_message.parts if part.HasField("data")]
        text = text_of(status_message) or (json.dumps(data[0], ensure_ascii=False) if data else "")
        metadata: dict[str, Any] = {"data": data[0]} if data else {}
        parts = list(status_message.parts)  # the structured call or result stays a data part
        async with self.bus.transaction(self.room.id) as tx:
            await self._write(tx, self.agent_id, text, parts=parts, kind=kind, metadata=metadata, wake=False)
            if kind == "tool_call" and data:
                row = await executions.fresh(tx, self.execution.id)
                if row is not None:
                    row.tool_calls = [*row.tool_calls, data[0]]

    def _delta(self, event: TaskArtifactUpdateEvent) -> None:
        """Streamed text, live: the agent's, or (a team's hop chunk) the member's, under the member's
        execution, so the page grows it in place until the hop's reply replaces it."""
        text = "".join(part.text for part in event.artifact.parts if part.HasField("text"))
        if not text or event.artifact.artifact_id == f"{self.execution.id}-reply":
            return
        agent, execution = self.agent_id, self.execution.id
        member = event.artifact.name
        if self.team and member in self.member_executions:
            agent, execution = member, self.member_executions[member]
        data = {"execution_id": execution, "agent": agent, "text": text, "append": event.append}
        self.bus.live(self.room.id, "message.delta", data)

    async def _hop_reply(self, event: TaskArtifactUpdateEvent) -> None:
        """A team's hop ended: its member's reply, the routing decision, the member ready again."""
        hop = _struct_value(event.artifact.metadata, keys.HOP)
        if not isinstance(hop, dict):
            return
        member = str(hop.get("agent"))
        self.last_member = member
        async with self.bus.transaction(self.room.id) as tx:
            member_row = await executions.current(tx, self.room.id, member)
            await self.writer.write(
                tx,
                self.room,
                "agent",
                member,
                parts=list(event.artifact.parts),
                metadata={keys.HOP: hop, keys.TEAM: self.agent_id},
                execution_id=member_row.id,
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
                    **{key: hop[key] for key in ("trail", "loop", "tokens") if hop.get(key)},
                    **_trace(),
                },
            )
        await self._member(member, INPUT_REQUIRED, ExecutionStatus.READY, turn=True)

    # -- once the turn's task is stored -------------------------------------------------------------

    async def settled(self, run: Run) -> None:
        task = run.task
        if task is None:  # pragma: no cover - a room's run always has its task
            return
        state = task.status.state
        reason = text_of(task.status.message) if task.status.HasField("message") else ""
        failed_member: str | None = None
        handed = False
        async with self.bus.transaction(self.room.id) as tx:
            row = await executions.fresh(tx, self.execution.id)
            if run.ending is None and state in UNSUCCESSFUL:
                failed_member = await self._failed(tx, reason or "the turn failed", task)
            elif run.ending is None and not self.team:  # ready, waiting for input, done, or handing off
                handoff = client_routing.read_handoff(task)
                if handoff is not None and row is not None:
                    handed = await self._hand_off(tx, row, handoff, reply_parts(task))
                else:
                    await self._reply(tx, reply_parts(task))
            if row is not None and not handed:
                if row.handoff_to is not None and executions.status_of(task) == ExecutionStatus.READY:
                    await self._still_waiting(tx, row)
                else:
                    await executions.project(tx, row, task, turn=run.ending is None)
        if failed_member is not None:
            await self._member(failed_member, FAILED, ExecutionStatus.FAILED, reason)
        approval = (
            _struct_value(task.status.message.metadata, keys.APPROVAL)
            if task.status.HasField("message")
            else None
        )
        if self.team and isinstance(approval, dict) and run.ending is None:
            await self._ask_approval(approval, reason)
        elif self.team and executions.status_of(task) == ExecutionStatus.INPUT_REQUIRED and self.last_member:
            await self._member(self.last_member, INPUT_REQUIRED, ExecutionStatus.INPUT_REQUIRED, reason)

    async def _reply(self, tx: Tx, reply: list[Part]) -> None:
        if reply:
            await self._write(tx, self.agent_id, parts=reply, chain=self.chain + 1)

    async def _hand_off(
        self, tx: Tx, row: Execution, handoff: client_routing.Handoff, reply: list[Part]
    ) -> bool:
        """The agent's answer hands the work to another agent of the room (docs/routing.md, "Handoffs
        in rooms"): its reply is the message handing it over, unless the handoff brings its own. A
        handoff that cannot be made is said in the room, and the turn ends as if none was asked
        (a child then completes with its answer)."""
        asked = [Part(text=handoff.message)] if handoff.message else reply
        if not _said(asked):
            asked = [Part(text=handoff.reason or f"@{handoff.agent}")]
        try:
            if handoff.message and _said(reply):
                await self._reply(tx, reply)
            await self.writer.hand_off(
                tx, self.room, row, handoff.agent, handoff.reason, asked, chain=self.chain + 1, turn=True
            )
        except (Conflict, InvalidInput) as refused:
            if not handoff.message:
                await self._reply(tx, reply)
            text = f"[ranch] handoff refused: {refused}"
            await self._write(tx, "ranch", text, kind="error", sender_kind="system", wake=False)
            if row.parent_execution_id is not None and row.status not in executions.FINAL:
                await executions.move(tx, row, ExecutionStatus.COMPLETED, text, turn=True)
                record = self.writer.record
                tx.later.append(partial(record, row, COMPLETED, ExecutionStatus.COMPLETED, text))
                return True
            return False
        return True

    async def _still_waiting(self, tx: Tx, row: Execution) -> None:
        """A turn of an execution that waits on its child (someone wrote to its agent meanwhile) leaves
        it waiting, not ready: its status is `handoff` again, its task WORKING."""
        why = f"waits on execution {row.handoff_to}"
        await executions.move(tx, row, ExecutionStatus.HANDOFF, why, turn=True)
        tx.later.append(partial(self.writer.record, row, WORKING, ExecutionStatus.HANDOFF, why))

    async def _ask_approval(self, approval: dict[str, Any], question: str) -> None:
        """The team waits for a person's approval: its question in the room, and an event the page
        answers with Approve / Deny (a message `@team approve` or `@team deny`)."""
        async with self.bus.transaction(self.room.id) as tx:
            await self._write(
                tx,
                self.agent_id,
                question,
                metadata={keys.APPROVAL: approval},
                sender_kind="team",
                wake=False,
            )
            data = {"team": self.agent_id, "execution_id": self.execution.id, **approval}
            await tx.emit(self.room.id, "approval.requested", data)

    async def _failed(self, tx: Tx, reason: str, task: Task) -> str | None:
        """Say in the room why the turn failed; a team's failing member, when the team names one."""
        if not self.team:
            await self._write(
                tx, "ranch", f"[ranch] {reason}", kind="error", sender_kind="system", wake=False
            )
            return None
        await self._write(tx, self.agent_id, reason, kind="error", sender_kind="team", wake=False)
        error = _struct_value(task.metadata, client_routing.URI)
        member = (error or {}).get("error", {}).get("agent") if isinstance(error, dict) else None
        return str(member) if member else None

    async def _write(
        self,
        tx: Tx,
        sender: str,
        text: str = "",
        *,
        parts: list[Part] | None = None,
        kind: str = "text",
        metadata: dict[str, Any] | None = None,
        sender_kind: str = "agent",
        chain: int = 0,
        wake: bool = True,
    ) -> NewMessage:
        """A message of this turn in the room (the agent's, unless another sender is named)."""
        return await self.writer.write(
            tx,
            self.room,
            sender_kind,
            sender,
            text,
            parts=parts,
            kind=kind,
            metadata=metadata,
            execution_id=self.execution.id,
            chain=chain,
            wake=wake,
        )


async def fail_unstarted(writer: MessageWriter, room: Room, execution: Execution, reason: str) -> None:
    """A turn that could not start (the agent is not served here): the execution fails, saying why."""
    task = await writer.tasks.record(
        execution.id,
        executions.owner(room.id),
        FAILED,
        reason,
        context_id=room.id,
        execution=ExecutionStatus.FAILED,
    )
    async with writer.bus.transaction(room.id) as tx:
        await writer.write(
            tx,
            room,
            "system",
            "ranch",
            f"[ranch] {reason}",
            kind="error",
            execution_id=execution.id,
            wake=False,
        )
        row = await executions.fresh(tx, execution.id)
        if row is not None:
            await executions.project(tx, row, task, turn=True)


def _said(parts: list[Part]) -> bool:
    """Whether a reply says anything: a part other than text, or some text (a handoff's may be empty)."""
    return any(part.WhichOneof("content") != "text" or part.text.strip() for part in parts)


def _string(struct: Struct, key: str) -> str | None:
    value = struct.fields.get(key)
    return value.string_value if value is not None and value.HasField("string_value") else None


def _struct_value(struct: Struct, key: str) -> Any:
    if key not in struct.fields:
        return None
    return MessageToDict(struct).get(key)


def _trace() -> dict[str, str]:
    """The turn's trace id (and its link, with `--trace-url`), for the page to show on each hop."""
    trace_id = TRACE_ID.get()
    if not trace_id:
        return {}
    url = tracing.link(trace_id)
    return {"trace_id": trace_id, "trace_url": url} if url else {"trace_id": trace_id}
