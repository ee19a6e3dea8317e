"""Writing one message into a room: its row, its `message.created` event, and a delivery for each
agent it wakes (its mentions, else the room's default agent for a person's message).

`MessageWriter` is what every writer of a room goes through: a post (rooms/messages.py), a turn's
sink (rooms/sink.py), the dispatcher (rooms/delivery.py) and the A2A gateway. A handoff is such a
message too: the one handing work to another agent opens that agent's child execution, and when
the child ends its result is handed back to the waiting parent's agent (`hand_back`, as the bus
tells rooms/executing.py that the child ended). It knows nothing of who reads the deliveries: the
dispatcher binds `wake` when the runtime is built (rooms/runtime.py), so the writer imports neither
the dispatcher nor the sink that import it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, NamedTuple, cast

from a2a.types import Part, TaskState
from sqlalchemy import CursorResult, Table, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from ranch.db.models import (
    AgentRecord,
    Delivery,
    Execution,
    ExecutionStatus,
    MessageType,
    Participant,
    ParticipantKind,
    Room,
    RoomMessage,
    RoomStatus,
    now,
)
from ranch.exceptions import Conflict, InvalidInput
from ranch.identity.orgs import DEFAULT_ORG, candidates
from ranch.ids import new_id, random_hex
from ranch.observe import tracing
from ranch.policy.logs import TRACE_ID
from ranch.rooms import executions, views
from ranch.rooms import parts as room_parts
from ranch.rooms.access import RoomFacts
from ranch.rooms.bus import Bus, NewMessage, Tx
from ranch.rooms.mentions import mentioned
from ranch.tasks.engine import TaskEngine
from ranch.wire import keys
from ranch.wire.events import WORKING

MAX_AGENT_CHAIN = 10
"""Agent-to-agent messages in a row (by mention) before the room stops waking agents."""
CHAIN_KEY = keys.CHAIN
_INSERT_MESSAGE = insert(cast(Table, RoomMessage.__table__))

Wake = Callable[[Delivery], object]
"""Hands a committed delivery to the agent it names (the dispatcher's `wake`)."""


def _unbound(delivery: Delivery) -> object:
    raise RuntimeError(f"no dispatcher bound to wake agent '{delivery.agent_id}' (rooms/runtime.py)")


class MessageWriter:
    """Stores messages with their events and deliveries, in the caller's transaction."""

    def __init__(self, bus: Bus, tasks: TaskEngine) -> None:
        self.bus = bus
        self.tasks = tasks
        """The task engine every execution runs in (an execution is a task owned by its room)."""
        self.wake: Wake = _unbound
        """Set by the runtime to the dispatcher's `wake`, told after commit."""

    async def write(
        self,
        tx: Tx,
        room: Room | RoomFacts,
        sender_kind: str,
        sender_id: str,
        text: str = "",
        *,
        parts: Sequence[Part] | None = None,
        kind: str = MessageType.TEXT,
        mentions: Sequence[str] = (),
        metadata: dict[str, Any] | None = None,
        thread_id: str | None = None,
        execution_id: str | None = None,
        chain: int = 0,
        wake: bool = True,
    ) -> NewMessage:
        """Store a message (`text`, or A2A `parts`) with its event, and a delivery for each agent it
        wakes (a part an agent does not take reaches it as a note: rooms/delivery.py)."""
        if parts is not None:
            text = text or room_parts.joined_text(parts)
        texted = kind == MessageType.TEXT
        names = mentioned(text, list(mentions)) if texted else []
        present = await present_of(tx.session, room, names, sender_kind if wake and texted else None)
        names = own_names(room.org_id, names, present)
        meta = dict(metadata or {})
        if chain:
            meta[CHAIN_KEY] = chain
        message = NewMessage(
            id=new_id(),
            room_id=room.id,
            type=kind,
            sender_kind=sender_kind,
            sender_id=sender_id,
            text=text,
            parts=room_parts.stored(parts) if parts is not None else None,
            mentions=names,
            meta=meta,
            thread_id=thread_id,
            execution_id=execution_id,
            created_at=now(),
        )
        targets = woken(room, names, sender_kind, sender_id, present) if wake and texted else []
        if targets:  # its deliveries name its seq: stored now, after the messages held before it
            await tx.store_held()
            message.seq = await _insert(tx.session, message)
            created = await tx.emit(room.id, "message.created", views.message(message))
            await self._deliver(tx, room, message, targets, chain)
        else:  # stored with the transaction's other messages (a batch of posts: one INSERT)
            tx.hold(message)
            created = await tx.emit(room.id, "message.created", partial(views.message, message))
        tx.created[message.id] = created
        return message

    async def record(self, row: Execution, state: TaskState, status: str, text: str = "") -> None:
        """An execution's task follows what happened outside a run (an external agent's turn)."""
        await self.tasks.record(
            row.id, executions.owner(row.room_id), state, text, context_id=row.room_id, execution=status
        )

    async def hand_off(
        self,
        tx: Tx,
        room: Room,
        parent: Execution,
        agent: str,
        reason: str,
        parts: Sequence[Part],
        *,
        chain: int = 0,
        turn: bool = False,
    ) -> Execution:
        """`parent`'s agent hands work to `agent` of the room: a child execution for it, the message
        handing it over (`parts`, addressed to it: the child's first turn), and the parent waiting,
        `handoff` (its task WORKING). Refused, naming `agent`, before anything is written."""
        target = await self._handoff_target(tx, room, parent, agent, chain)
        child = await executions.open_child(tx, parent, target)
        parent.handoff_to = child.id
        why = f"handed off to {target}" + (f": {reason}" if reason else "")
        await executions.move(tx, parent, ExecutionStatus.HANDOFF, why, turn=turn)
        link = {"parent": parent.id, "child": child.id, "agent": target, "reason": reason}
        await self.write(
            tx,
            room,
            "agent",
            parent.agent_id,
            parts=parts,
            mentions=[target],
            metadata={keys.HANDOFF: link},
            execution_id=parent.id,
            chain=chain,
        )
        tx.later.append(partial(self.record, parent, WORKING, ExecutionStatus.HANDOFF, why))
        return child

    async def _handoff_target(self, tx: Tx, room: Room, parent: Execution, agent: str, chain: int) -> str:
        """The room's agent `agent` names, when `parent` may hand off to it: not itself, not one that
        waits for this very work (a loop), not one waiting on a handoff of its own."""
        if parent.status in executions.FINAL:
            raise Conflict(f"execution '{parent.id}' already ended ({parent.status})", "execution_id")
        if parent.handoff_to is not None:
            raise Conflict(
                f"execution '{parent.id}' already waits on execution '{parent.handoff_to}'", "agent"
            )
        if chain >= MAX_AGENT_CHAIN:
            raise Conflict(
                f"{MAX_AGENT_CHAIN} agent messages in a row; a person's message starts a new chain"
            )
        present = await present_of(tx.session, room, [agent], "agent")
        target = own_names(room.org_id, [agent], present)[0]
        if present is None or target not in present.agents:
            raise InvalidInput(f"'{agent}' is not an agent of room '{room.id}'", "agent")
        if target == parent.agent_id:
            raise InvalidInput(f"agent '{target}' cannot hand off to itself", "agent")
        lineage = await executions.lineage(tx, parent)
        if any(row.agent_id == target for row in lineage):
            path = " → ".join([*(row.agent_id for row in reversed(lineage)), target])
            raise Conflict(
                f"handoff loop ({path}): '{target}' waits for this work, so it cannot take it over", "agent"
            )
        current = await tx.session.scalar(executions.current_query(room.id, target))
        if current is not None and current.status == ExecutionStatus.HANDOFF:
            raise Conflict(
                f"agent '{target}' waits on a handoff of its own (execution '{current.id}')", "agent"
            )
        return target

    async def hand_back(self, child: Execution) -> None:
        """A child execution ended: its parent stops waiting and, unless it ended meanwhile, its agent
        is woken with the child's result: the child's last reply, or why it ended."""
        room_id = child.room_id
        async with self.bus.transaction(room_id) as tx:
            parent = await tx.session.get(Execution, child.parent_execution_id)
            if parent is None or parent.handoff_to != child.id:
                return
            parent.handoff_to = None
            await tx.emit(room_id, "execution.updated", views.execution(parent))
            room = await tx.session.get(Room, room_id)
            if parent.status in executions.FINAL or room is None or room.status != RoomStatus.ACTIVE:
                return
            reply = await tx.session.scalar(
                select(RoomMessage)
                .where(
                    RoomMessage.room_id == room_id,
                    RoomMessage.execution_id == child.id,
                    RoomMessage.sender_id == child.agent_id,
                    RoomMessage.type == MessageType.TEXT,
                )
                .order_by(RoomMessage.seq.desc())
                .limit(1)
            )
            if child.status == ExecutionStatus.COMPLETED and reply is not None:
                chain = min(
                    int(reply.meta.get(CHAIN_KEY, 0)), MAX_AGENT_CHAIN - 1
                )  # a result always gets back
                await self._deliver(tx, room, reply, [parent.agent_id], chain)
                return
            why = f": {child.reason}" if child.reason else ""
            link = {"parent": parent.id, "child": child.id, "agent": child.agent_id, "status": child.status}
            await self.write(
                tx,
                room,
                "system",
                "ranch",
                f"[ranch] the handoff to {child.agent_id} {child.status}{why}",
                mentions=[parent.agent_id],
                metadata={keys.HANDOFF: link},
            )

    async def _deliver(
        self,
        tx: Tx,
        room: Room | RoomFacts,
        message: RoomMessage | NewMessage,
        targets: list[str],
        chain: int,
    ) -> None:
        if chain >= MAX_AGENT_CHAIN:
            await self.write(
                tx,
                room,
                "system",
                "ranch",
                f"[ranch] {MAX_AGENT_CHAIN} agent messages in a row; not waking {', '.join(targets)}. "
                "A person's message starts a new chain.",
                kind=MessageType.ERROR,
                wake=False,
            )
            return
        external = set(
            (
                await tx.session.scalars(
                    select(AgentRecord.id).where(AgentRecord.id.in_(targets), AgentRecord.is_external)
                )
            ).all()
        )
        for target in targets:
            delivery = Delivery(
                id=new_id(),
                message_seq=message.seq,
                room_id=room.id,
                agent_id=target,
                runner=self.tasks.runner,  # this replica wakes it (rooms/delivery.py)
                trace=_traceparent(),
            )
            tx.session.add(delivery)
            tx.deliveries.append(delivery)
            if target in external:  # it reads its deliveries over the API: its execution works now
                row = await executions.current(tx, room.id, target)
                await executions.move(tx, row, ExecutionStatus.WORKING)
                tx.later.append(partial(self.record, row, WORKING, ExecutionStatus.WORKING))
                tx.after.append(partial(self.bus.to_agent, target, views.delivery(delivery, message)))
            else:
                tx.after.append(partial(self._wake, delivery))

    def _wake(self, delivery: Delivery) -> None:
        self.wake(delivery)  # read when told, so a wake bound after the write is the one called


class Present(NamedTuple):
    """The room's participants a message reads: every id, and those of its agents and teams."""

    refs: set[str]
    agents: set[str]


async def present_of(
    session: AsyncSession, room: Room | RoomFacts, names: list[str], waker: str | None
) -> Present | None:
    """The room's participants when a message needs them (its mentions name some, or it may wake
    the default agent: `waker` is the sender's kind when it wakes agents); None when it does not,
    and no query is made (a plain post)."""
    own = bool(names) and (room.org_id != DEFAULT_ORG or waker is not None)
    if not own and not (waker == "user" and room.default_agent is not None):
        return None
    rows = (
        await session.execute(select(Participant.ref, Participant.kind).where(Participant.room_id == room.id))
    ).all()
    agents = {ref for ref, kind in rows if kind in (ParticipantKind.AGENT, ParticipantKind.TEAM)}
    return Present({ref for ref, _kind in rows}, agents)


def woken(
    room: Room | RoomFacts, names: list[str], sender_kind: str, sender_id: str, present: Present | None
) -> list[str]:
    """The agents and teams of the room a message wakes: those it names (not its sender), else, for
    a person's message, the room's default agent."""
    if present is None:
        return []
    targets = [name for name in names if name in present.agents and name != sender_id]
    if not targets and sender_kind == "user" and room.default_agent in present.agents:
        targets = [room.default_agent]
    return targets


def own_names(org_id: str, names: list[str], present: Present | None) -> list[str]:
    """Mentions as participant ids: `@helper` in a room of `acme` is `acme.helper` when it takes part."""
    if not names or present is None or org_id == DEFAULT_ORG:
        return names
    resolved = (next((c for c in candidates(org_id, name) if c in present.refs), name) for name in names)
    return list(dict.fromkeys(resolved))


async def _insert(session: AsyncSession, message: NewMessage) -> int:
    """Store `message` with one INSERT, outside the session's unit of work (nothing to flush, no row
    read back); its `seq`."""
    connection = await session.connection()  # a plain statement: no ORM machinery on the way
    result = cast(CursorResult[Any], await connection.execute(_INSERT_MESSAGE, message.row()))
    key = result.inserted_primary_key  # SQLite's rowid, PostgreSQL's RETURNING
    assert key is not None
    seq: int = key[0]
    return seq


def _traceparent() -> str | None:
    """What a delivery keeps of the request that posted its message: the span's `traceparent` with
    tracing on, else one naming the request's trace id (not sampled), so the turn's log lines and
    the page's trace id are the request's either way."""
    if tracing.tracer() is not None:
        return tracing.traceparent()
    trace_id = TRACE_ID.get()
    return f"00-{trace_id}-{random_hex()[:16]}-00" if trace_id else None
