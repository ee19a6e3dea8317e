"""Running agents in rooms: one worker per (room, agent), messages handled in order.

Agents work concurrently across rooms; one agent in one room takes one message at a time.
Each message an agent is woken for is one turn of its execution, a long-lived task of the
task engine: the agent receives the room history its `history_length` allows (a context part
before the message), and a `RoomSink` writes what the turn does back into the room. Callers
that posted the message (the A2A gateway) wait on its `DeliveryWatch`, not on the database.
"""

from __future__ import annotations

import logging
import re
from collections import deque
from dataclasses import dataclass, field

import anyio
from a2a.types import Message, Part, Role, Task
from a2a.utils.errors import A2AError
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream
from sqlalchemy import ColumnElement, or_, select, update
from sqlalchemy.orm import aliased

from ranch.agents.base import Agent, AgentInfo, Call, Event
from ranch.catalog.registry import Registry
from ranch.db.models import (
    AgentRecord,
    Delivery,
    DeliveryStatus,
    Execution,
    ExecutionStatus,
    Participant,
    Room,
    RoomMessage,
    RoomStatus,
    User,
)
from ranch.exceptions import AgentNotFound
from ranch.identity.caller import Caller
from ranch.ids import new_id
from ranch.observe import tracing
from ranch.policy.logs import trace_id_from, traced
from ranch.rooms import executions
from ranch.rooms import parts as room_parts
from ranch.rooms.bus import Tx
from ranch.rooms.sink import RoomSink, fail_unstarted
from ranch.rooms.turns import CHILD_TURNS, EXECUTION_TURNS
from ranch.rooms.writing import MessageWriter
from ranch.routing import context
from ranch.routing.team import Team
from ranch.tasks.protos import at_rest
from ranch.tasks.run import Run
from ranch.wire import keys, modes

logger = logging.getLogger(__name__)

CONTEXT_TYPES = ("text", "error")
NEXT_IN_LINE_POLL = 0.1
"""Seconds between two looks at whether a delivery waiting behind another replica's is next."""
ROOM_HEADER = "[ranch] Room history (latest last):"


@dataclass(eq=False)
class DeliveryWatch:
    """One delivery on its way: when its turn starts (with its run) and when it is handled."""

    started: anyio.Event = field(default_factory=anyio.Event)
    handled: anyio.Event = field(default_factory=anyio.Event)
    run: Run | None = None
    execution_id: str = ""
    wants_events: bool = False
    """Someone streams this turn (SendStreamingMessage into a room): subscribe as the run starts."""
    events: MemoryObjectReceiveStream[Event] | None = None


class Dispatcher:
    """Owns the workers; `wake` is called after a delivery is committed."""

    def __init__(self, writer: MessageWriter, registry: Registry, group: TaskGroup) -> None:
        self.writer = writer
        """Where a turn's sink writes into the room; it wakes agents through `wake` here."""
        self.bus = writer.bus
        self.tasks = writer.tasks
        self.registry = registry
        self.group = group
        self._queues: dict[tuple[str, str], deque[str]] = {}
        self._watches: dict[str, DeliveryWatch] = {}

    def wake(self, delivery: Delivery) -> DeliveryWatch:
        key = (delivery.room_id, delivery.agent_id)
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = deque()
            self.group.start_soon(self._work, key)
        queue.append(delivery.id)
        return self._watches.setdefault(delivery.id, DeliveryWatch())

    def watch(self, delivery_id: str) -> DeliveryWatch | None:
        """The watch of a delivery woken and not yet handled (None once it is)."""
        return self._watches.get(delivery_id)

    async def _work(self, key: tuple[str, str]) -> None:
        queue = self._queues[key]
        try:
            while queue:
                delivery_id = queue.popleft()
                watch = self._watches.setdefault(delivery_id, DeliveryWatch())
                try:
                    await self._handle(key[0], delivery_id, watch)
                except Exception:  # a bug here must not stop the room's next messages
                    logger.exception("delivery %s in room %s failed", delivery_id, key[0])
                finally:
                    watch.started.set()
                    watch.handled.set()
                    self._watches.pop(delivery_id, None)
        finally:
            del self._queues[key]

    async def _handle(self, room_id: str, delivery_id: str, watch: DeliveryWatch) -> None:
        taken = await self._take(room_id, delivery_id)
        if taken is None:
            return
        room, message, execution, parent = taken
        watch.execution_id = execution.id
        span = None
        if tracing.tracer() is not None:  # off: no attributes made, no traceparent parsed
            span = tracing.start(
                f"ranch.delivery {execution.agent_id}",
                {"ranch.room": room.id, "ranch.agent": execution.agent_id, "ranch.execution": execution.id},
                parent=tracing.resumed(parent),
            )
        try:
            trace_id = tracing.trace_id_of(span) if span is not None else trace_id_from(parent)
            with tracing.current(span), traced(trace_id):
                await self._turn(room, message, execution, watch)
        finally:
            if span is not None:
                span.end()
            await self._done(delivery_id)

    async def _take(
        self, room_id: str, delivery_id: str
    ) -> tuple[Room, RoomMessage, Execution, str | None] | None:
        """Claim the delivery and start its execution's turn, once it is its agent's next in its room.

        Also answers the `traceparent` stored with it (its turn joins that trace). One replica runs it,
        however many woke it; and an agent takes one message of a room at a
        time, in order, across replicas: while an earlier message of the room waits for it, or one
        is being answered (on any replica), this one waits. None when it is not ours to run.
        """
        while True:
            async with self.bus.transaction(room_id) as tx:
                delivery = await tx.session.get(Delivery, delivery_id)
                if (
                    delivery is None
                    or delivery.status != DeliveryStatus.PENDING
                    or delivery.room_id != room_id
                ):
                    return None
                claimed = await tx.session.execute(
                    update(Delivery)
                    .where(
                        Delivery.id == delivery_id,
                        Delivery.status == DeliveryStatus.PENDING,
                        ~_ahead_of(delivery),
                    )
                    .values(status=DeliveryStatus.RUNNING, runner=self.tasks.runner),
                    execution_options={"synchronize_session": False},
                )
                if claimed.rowcount:  # type: ignore[attr-defined]
                    message = await tx.session.get(RoomMessage, delivery.message_seq)
                    room = await tx.session.get(Room, delivery.room_id)
                    if message is None or room is None or room.status != RoomStatus.ACTIVE:
                        delivery.status = DeliveryStatus.DONE
                        return None
                    execution = await _handed(tx, message, delivery.agent_id)
                    if execution is None:
                        execution = await executions.current(tx, room.id, delivery.agent_id)
                    elif execution.status in executions.FINAL:  # work handed over, canceled before it began
                        delivery.status = DeliveryStatus.DONE
                        return None
                    await executions.move(
                        tx, execution, ExecutionStatus.WORKING
                    )  # its task follows as the turn starts
                    return room, message, execution, delivery.trace
            await anyio.sleep(NEXT_IN_LINE_POLL)  # another delivery of this agent in this room goes first

    async def _turn(
        self, room: Room, message: RoomMessage, execution: Execution, watch: DeliveryWatch
    ) -> None:
        """One turn of the execution: the agent on the message, its run watched until it ends."""
        try:
            agent = self.registry.get(execution.agent_id)
        except AgentNotFound:
            await fail_unstarted(
                self.writer, room, execution, f"agent '{execution.agent_id}' is not available on this server"
            )
            return
        owner = executions.owner(room.id)
        sink = RoomSink(self.writer, room, message, execution, team=isinstance(agent, Team))
        incoming = await self.incoming(agent, room, message, execution.agent_id)
        if execution.parent_execution_id is not None:  # work handed over: the task it was handed by
            incoming.reference_task_ids.append(execution.parent_execution_id)
        lifetime = CHILD_TURNS if execution.parent_execution_id is not None else EXECUTION_TURNS
        call = Call(owner=owner, caller=await self.caller(room, message), resumable=True)
        try:
            run = await self.tasks.start(
                agent, incoming, call, owner, task_id=execution.id, lifetime=lifetime, sink=sink
            )
        except A2AError as exc:  # its task ended meanwhile (canceled elsewhere): the turn cannot run
            await fail_unstarted(self.writer, room, execution, f"the execution cannot take a turn: {exc}")
            return
        watch.run = run
        if watch.wants_events:  # before the run's first event: nothing is missed
            watch.events = run.subscribe()
        watch.started.set()
        await run.done.wait()

    async def resume(self, task: Task, agent: Agent, message: Message, call: Call, delivery_id: str) -> bool:
        """A turn of a room's execution a stopped replica was running (a team's, from its checkpoint),
        going on here as the same task: `delivery_id`, already this replica's and still running (so the
        agent's next message in the room waits), is done once the turn ends. False when its room, its
        message or its execution is gone."""
        async with self.bus.sessions() as session:
            execution = await session.get(Execution, task.id)
            room = await session.get(Room, execution.room_id) if execution is not None else None
            delivery = await session.get(Delivery, delivery_id)
            posted = await session.get(RoomMessage, delivery.message_seq) if delivery is not None else None
        if execution is None or room is None or posted is None or room.status != RoomStatus.ACTIVE:
            await self._done(delivery_id)
            return False
        sink = RoomSink(self.writer, room, posted, execution, team=True)
        lifetime = CHILD_TURNS if execution.parent_execution_id is not None else EXECUTION_TURNS
        run = await self.tasks.resume(agent, task, call.owner, message, call, lifetime=lifetime, sink=sink)
        self.group.start_soon(self._done_after, run, delivery_id)
        return True

    async def _done_after(self, run: Run, delivery_id: str) -> None:
        await run.done.wait()
        await self._done(delivery_id)

    async def _done(self, delivery_id: str) -> None:
        """The delivery is handled: the agent's next message in the room may be taken."""
        async with self.bus.transaction() as tx:  # no event: it waits for no room
            row = await tx.session.get(Delivery, delivery_id)
            if row is not None:
                row.status = DeliveryStatus.DONE

    async def settle_left(self, delivery: Delivery) -> None:
        """A delivery a stopped replica was answering: when its turn had ended (its task stored,
        waiting for input or done) but the replica stopped before its room was told, the room is told
        now as the turn's sink would have: the reply or the question, the execution's status."""
        async with self.bus.sessions() as session:
            room = await session.get(Room, delivery.room_id)
            posted = await session.get(RoomMessage, delivery.message_seq)
            row = (
                await session.scalars(executions.current_query(delivery.room_id, delivery.agent_id))
            ).first()
        if room is None or posted is None or row is None or row.status not in executions.BUSY:
            return
        owner = executions.owner(room.id)
        try:
            task = await self.tasks.get(row.id, owner)
        except A2AError:  # no task yet: the turn never began
            return
        if not at_rest(task) or task.id in self.tasks.live:
            return  # still running (here, resumed), or failed by the take-over (its row follows it)
        team = self.registry.get(row.agent_id) if row.agent_id in self.registry else None
        sink = RoomSink(self.writer, room, posted, row, team=isinstance(team, Team))
        await sink.settled(Run(task_id=task.id, context_id=task.context_id, owner=owner, task=task))

    async def caller(self, room: Room, message: RoomMessage) -> Caller | None:
        """Who posted the message, as a team's routing sees the caller (a person with their role)."""
        if message.sender_kind == "user":
            async with self.bus.sessions() as session:
                user = await session.get(User, message.sender_id)
                in_room = await session.scalar(
                    select(Participant.role).where(
                        Participant.room_id == room.id,
                        Participant.kind == "user",
                        Participant.ref == message.sender_id,
                    )
                )
            role = str(user.role) if user else None
            return Caller(message.sender_id, room.org_id, "person", role, str(in_room) if in_room else None)
        if message.sender_kind in ("agent", "team"):
            return Caller(message.sender_id, room.org_id, "agent")
        return None

    async def incoming(self, agent: Agent, room: Room, message: RoomMessage, agent_id: str) -> Message:
        """The A2A message the agent receives: room history (bounded), then the message."""
        limit = agent.history_length if agent.history_length is not None else context.DEFAULT_HISTORY_LENGTH
        rows: list[RoomMessage] = []
        if limit:
            async with self.bus.sessions() as session:
                found = await session.scalars(
                    select(RoomMessage)
                    .where(
                        RoomMessage.room_id == room.id,
                        RoomMessage.seq < message.seq,
                        RoomMessage.type.in_(CONTEXT_TYPES),
                    )
                    .order_by(RoomMessage.seq.desc())
                    .limit(limit)
                )
                rows = list(reversed(found.all()))
        entries = [context.Entry(row.sender_id, room_parts.described(row)) for row in rows]
        part = context.render(entries, header=ROOM_HEADER)
        incoming = Message(
            message_id=new_id(),
            role=Role.ROLE_USER,
            context_id=room.id,
            parts=([part] if part else []) + _taken(agent, await agent.info(), message, agent_id),
        )
        incoming.metadata.update(
            {
                keys.MESSAGE: {
                    "id": message.id,
                    "cursor": message.seq,
                    "sender": {"kind": message.sender_kind, "id": message.sender_id},
                    "room": room.id,
                }
            }
        )
        return incoming


async def _handed(tx: Tx, message: RoomMessage, agent_id: str) -> Execution | None:
    """The child execution a message hands `agent_id` its work in (a handoff's), if it is one."""
    link = message.meta.get(keys.HANDOFF)
    if not isinstance(link, dict) or link.get("agent") != agent_id or "child" not in link:
        return None
    return await tx.session.get(Execution, str(link["child"]))


def _ahead_of(delivery: Delivery) -> ColumnElement[bool]:
    """Whether a delivery of the same agent in the same room goes before this one: being answered,
    or waiting with an earlier message. Two lookups on the (room, agent, status, message) index, so
    the room's past deliveries (all done) are never read."""
    other = aliased(Delivery)
    mine = (other.room_id == delivery.room_id, other.agent_id == delivery.agent_id, other.id != delivery.id)
    running = select(other.id).where(*mine, other.status == DeliveryStatus.RUNNING)
    earlier = select(other.id).where(
        *mine, other.status == DeliveryStatus.PENDING, other.message_seq < delivery.message_seq
    )
    return or_(running.exists(), earlier.exists())


def _taken(agent: Agent, info: AgentInfo, message: RoomMessage, agent_id: str) -> list[Part]:
    """The message's parts as `agent` receives them: its first text without the `@agent` that
    addressed it, and a note in place of each part its input modes do not take (a post by a
    person was refused for those; an agent's message is shown as far as it can be)."""
    parts = room_parts.as_parts(message)
    first = next((index for index, part in enumerate(parts) if part.WhichOneof("content") == "text"), None)
    if first is not None:
        parts[first] = Part(text=_addressed(parts[first].text, agent_id))
    return modes.shown(parts, agent.id, info.input_modes)


def _addressed(text: str, agent_id: str) -> str:
    """The text without the leading `@agent` that addressed it ("@helpdesk find x" -> "find x")."""
    stripped = re.sub(rf"^\s*@{re.escape(agent_id)}\b[\s,:]*", "", text)
    return stripped or text


async def recover(dispatcher: Dispatcher, failed: dict[str, Task], alive: set[str]) -> int:
    """On start and every take-over round: the rows of executions whose tasks the engine failed say
    so, the turns a stopped replica ended without telling their room are told it (`settle_left`),
    and the deliveries replicas that are gone had queued are queued here (external agents keep
    theirs: they read them over the API). Returns how many were queued."""
    await executions.follow_tasks(dispatcher.bus, failed)
    async with dispatcher.bus.transaction() as tx:
        closed, pending = await executions.recover(tx, alive, dispatcher.tasks.runner)
        external = set(
            (await tx.session.scalars(select(AgentRecord.id).where(AgentRecord.is_external.is_(True)))).all()
        )
    for delivery in closed:
        await dispatcher.settle_left(delivery)
    queued = 0
    for delivery in pending:
        if delivery.agent_id not in external:
            dispatcher.wake(delivery)
            queued += 1
    return queued
