"""Executions as callers see and steer them: listed, read as A2A tasks, handed off, cancelled or
completed.

An execution is a long-lived task of the task engine owned by its room (rooms/executions.py keeps
its row); ending one from outside ends its task first, stopping a turn in flight, and then brings
the row in line with what the task became. Ending one ends the open executions it handed work to.
"""

from __future__ import annotations

from a2a.types import Part, Task, TaskStatus
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError
from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from ranch.db.models import AgentRecord, Delivery, Execution, ExecutionStatus, Room, RoomMessage, RoomStatus
from ranch.exceptions import Conflict, NotFound
from ranch.identity.principal import Principal
from ranch.rooms import executions
from ranch.rooms.access import require_room_admin, visible_room
from ranch.rooms.adapters import execution_view
from ranch.rooms.executions import FINAL
from ranch.rooms.requests import HandOff
from ranch.rooms.views import ExecutionDetail, ExecutionView
from ranch.rooms.writing import MessageWriter
from ranch.wire.events import CANCELED, COMPLETED, SUBMITTED


class RoomExecutions:
    """The executions of the agents in rooms, through the task engine they run in."""

    def __init__(self, writer: MessageWriter) -> None:
        self.writer = writer
        """Writes a handoff's message, its child execution and its delivery."""
        self.bus = writer.bus
        self.tasks = writer.tasks

    async def executions(self, principal: Principal, room_id: str) -> list[Execution]:
        async with self.bus.sessions() as session:
            await visible_room(session, principal, room_id)
            rows = await session.scalars(
                select(Execution).where(Execution.room_id == room_id).order_by(Execution.created_at.desc())
            )
            return list(rows.all())

    async def execution(self, principal: Principal, execution_id: str) -> Execution:
        async with self.bus.sessions() as session:
            return await _visible(session, principal, execution_id)

    async def detail(self, principal: Principal, execution_id: str) -> ExecutionDetail:
        """The execution with the one it works for and those it handed work to."""
        async with self.bus.sessions() as session:
            row = await _visible(session, principal, execution_id)
            parent = None
            if row.parent_execution_id is not None:
                parent = await session.get(Execution, row.parent_execution_id)
            children = await executions.children(session, row.id)
        detail = ExecutionView.model_validate(row).model_dump()
        return ExecutionDetail.model_validate(
            {
                **detail,
                "parent": ExecutionView.model_validate(parent) if parent is not None else None,
                "children": [ExecutionView.model_validate(child) for child in children],
            }
        )

    async def hand_off(self, principal: Principal, execution_id: str, request: HandOff) -> Execution:
        """Hand the execution's work to another agent of its room (its own agent's call, an external
        agent's; or a room admin's): a child execution for that agent, this one waiting (`handoff`)."""
        async with self.bus.sessions() as session:
            row = await _visible(session, principal, execution_id)
            if principal.kind != "agent" or principal.id != row.agent_id:
                await require_room_admin(session, principal, row.room_id)
        async with self.bus.transaction(row.room_id) as tx:
            parent = await executions.fresh(tx, row.id)
            room = await tx.session.get(Room, row.room_id)
            if parent is None or room is None:
                raise NotFound(f"no execution '{execution_id}'", "execution_id")
            if room.status != RoomStatus.ACTIVE:
                raise Conflict(f"room '{room.id}' is {room.status}", "execution_id")
            text = request.message or request.reason or f"@{request.agent}"
            parts = [Part(text=text)]
            await self.writer.hand_off(tx, room, parent, request.agent, request.reason, parts, turn=True)
        async with self.bus.sessions() as session:
            handed = await session.get(Execution, row.id)
        return handed or row

    async def cancel(self, principal: Principal, execution_id: str) -> Execution:
        """Stop the execution's agent (its reply is never posted) and end it CANCELED."""
        row = await self.execution(principal, execution_id)
        return await self.end(row, ExecutionStatus.CANCELED, f"canceled by {principal.id}")

    async def complete(self, principal: Principal, execution_id: str, reason: str = "") -> Execution:
        """End the execution COMPLETED (a room admin's call): its agent's next message starts a new one."""
        async with self.bus.sessions() as session:
            row = await _visible(session, principal, execution_id)
            await require_room_admin(session, principal, row.room_id)
        return await self.end(row, ExecutionStatus.COMPLETED, reason or f"completed by {principal.id}")

    async def end(self, row: Execution, ending: ExecutionStatus, reason: str) -> Execution:
        """End an execution from outside: `canceled` or `completed`, with why."""
        if row.status in FINAL:
            raise Conflict(f"execution '{row.id}' already ended ({row.status})", "execution_id")
        await self.end_task(row, ending, reason)  # its open child is canceled as it ends (`ended`)
        async with self.bus.sessions() as session:
            ended = await session.get(Execution, row.id)
        return ended or row

    async def ended(self, row: Execution) -> None:
        """An execution of a handoff ended (the bus tells, after commit): the open executions it
        handed work to are canceled (theirs follow as they end), and the one it worked for is woken
        with its result."""
        if row.handoff_to is not None:
            async with self.bus.sessions() as session:
                children = await executions.children(session, row.id)
            for child in children:
                if child.status not in FINAL:
                    await self.end_task(
                        child, ExecutionStatus.CANCELED, f"its parent execution {row.id} ended"
                    )
        if row.parent_execution_id is not None:
            await self.writer.hand_back(row)

    async def end_task(self, row: Execution, ending: ExecutionStatus, reason: str) -> None:
        """End the execution's task (stopping a turn in flight) and bring the row in line with it."""
        owner = executions.owner(row.room_id)
        try:
            if ending == ExecutionStatus.CANCELED:
                task = await self.tasks.cancel(row.id, owner, reason)
            else:
                task = await self.tasks.complete(row.id, owner, reason)
        except TaskNotFoundError:  # never ran a turn: nothing of it was stored yet
            state = CANCELED if ending == ExecutionStatus.CANCELED else COMPLETED
            task = await self.tasks.record(
                row.id, owner, state, reason, context_id=row.room_id, execution=ending
            )
        except TaskNotCancelableError:  # its task ended already: the row follows it
            task = await self.tasks.get(row.id, owner)
        async with self.bus.transaction(row.room_id) as tx:
            fresh = await executions.fresh(tx, row.id)
            if fresh is not None:
                await executions.project(tx, fresh, task)

    async def follow(self, tasks: dict[str, Task]) -> None:
        """Rows of executions whose tasks changed outside a run here (a stopped replica's) follow them."""
        await executions.follow_tasks(self.bus, tasks)

    async def task(self, principal: Principal, execution_id: str, history_length: int | None) -> Task:
        """The execution as an A2A Task (history: what the agent received or wrote)."""
        async with self.bus.sessions() as session:
            row = await _visible(session, principal, execution_id)
        return await self.execution_task(row, history_length)

    async def execution_task(self, row: Execution, history_length: int | None) -> Task:
        """`row` as an A2A Task, its history trimmed to `history_length` or else the agent's own."""
        try:
            task = await self.tasks.get(row.id, executions.owner(row.room_id))
        except TaskNotFoundError:  # never ran a turn yet (queued behind another message)
            task = Task(id=row.id, context_id=row.room_id, status=TaskStatus(state=SUBMITTED))
        async with self.bus.sessions() as session:
            limit = history_length
            if limit is None:
                limit = await session.scalar(
                    select(AgentRecord.history_length).where(AgentRecord.id == row.agent_id)
                )
            history = await execution_history(session, row)
            waits_on = [
                child.id for child in await executions.children(session, row.id) if child.status not in FINAL
            ]
        return execution_view(task, row, history, limit, waits_on)


async def _visible(session: AsyncSession, principal: Principal, execution_id: str) -> Execution:
    """The execution, when the caller may see its room; else NotFound (the same either way)."""
    row = await session.get(Execution, execution_id)
    if row is None:
        raise NotFound(f"no execution '{execution_id}'", "execution_id")
    try:
        await visible_room(session, principal, row.room_id)
    except NotFound:
        raise NotFound(f"no execution '{execution_id}'", "execution_id") from None
    return row


async def execution_history(session: AsyncSession, row: Execution) -> list[RoomMessage]:
    """Messages delivered to the execution's agent in its room, and those it wrote, oldest first."""
    delivered = select(Delivery.message_seq).where(
        Delivery.room_id == row.room_id, Delivery.agent_id == row.agent_id
    )
    rows = await session.scalars(
        select(RoomMessage)
        .where(
            RoomMessage.room_id == row.room_id,
            or_(
                RoomMessage.seq.in_(delivered),
                RoomMessage.sender_id == row.agent_id,
                RoomMessage.execution_id == row.id,
            ),
        )
        .order_by(RoomMessage.seq)
    )
    return list(rows.all())
