"""Executions as rows: a projection of their tasks, each change written with its event.

An execution (one agent's long-lived work in one room) is a task of the task engine: its
state is the task's. The `executions` row keeps the REST shape of docs/api.md (its status
in executions' own words, why, turns, tool calls) so a room lists and watches them; every
change goes through `move`, which writes the row and its `execution.updated` event in the
room's transaction. At start, `recover` brings rows back in line with their tasks.
"""

from __future__ import annotations

from a2a.types import Task, TaskState
from sqlalchemy import Select, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from ranch.agents.base import text_of
from ranch.db.models import OPEN_EXECUTION, Delivery, DeliveryStatus, Execution, ExecutionStatus, now
from ranch.ids import new_id
from ranch.rooms import views
from ranch.rooms.bus import Bus, Tx
from ranch.wire import keys
from ranch.wire.events import INTERRUPTED

FINAL = frozenset({ExecutionStatus.COMPLETED, ExecutionStatus.FAILED, ExecutionStatus.CANCELED})
"""Execution statuses that end it; the agent's next message in the room starts a new one."""
BUSY = frozenset({ExecutionStatus.SUBMITTED, ExecutionStatus.WORKING})

_STATES: dict[int, str] = {
    TaskState.TASK_STATE_SUBMITTED: ExecutionStatus.SUBMITTED,
    TaskState.TASK_STATE_WORKING: ExecutionStatus.WORKING,
    TaskState.TASK_STATE_INPUT_REQUIRED: ExecutionStatus.INPUT_REQUIRED,
    TaskState.TASK_STATE_AUTH_REQUIRED: ExecutionStatus.INPUT_REQUIRED,
    TaskState.TASK_STATE_COMPLETED: ExecutionStatus.COMPLETED,
    TaskState.TASK_STATE_FAILED: ExecutionStatus.FAILED,
    TaskState.TASK_STATE_CANCELED: ExecutionStatus.CANCELED,
    TaskState.TASK_STATE_REJECTED: ExecutionStatus.FAILED,
}


def owner(room_id: str) -> str:
    """Who owns a room's executions (and its conversations): the room, whoever posts in it."""
    return f"room:{room_id}"


def room_of(task_owner: str) -> str | None:
    """The room a task belongs to, when its owner is a room."""
    return task_owner.removeprefix("room:") if task_owner.startswith("room:") else None


def status_of(task: Task) -> str:
    """The execution's status as executions name it: `ready` or `input-required` for INPUT_REQUIRED."""
    marked = task.metadata.fields.get(keys.EXECUTION)
    if marked is not None and marked.WhichOneof("kind") == "struct_value":
        status = marked.struct_value.fields.get("status")
        if status is not None and status.WhichOneof("kind") == "string_value":
            return str(status.string_value)
    return _STATES.get(task.status.state, ExecutionStatus.WORKING)


def reason_of(task: Task) -> str:
    """Why it is in its status: the status message of a failed, canceled or completed execution, the
    question of one waiting for input, or the handoff one waits on (a ready one's message is its reply)."""
    status = status_of(task)
    waiting = (
        status == ExecutionStatus.HANDOFF
        or task.status.state in INTERRUPTED
        and status != ExecutionStatus.READY
    )
    if status in FINAL or waiting:
        return text_of(task.status.message) if task.status.HasField("message") else ""
    return ""


async def current(tx: Tx, room_id: str, agent_id: str) -> Execution:
    """The agent's open execution in the room, created (submitted) when there is none."""
    row = await tx.session.scalar(current_query(room_id, agent_id))
    if row is None:
        row = Execution(
            id=new_id(), room_id=room_id, agent_id=agent_id, status=ExecutionStatus.SUBMITTED, reason=""
        )
        tx.session.add(row)
        await tx.session.flush()
        await tx.emit(room_id, "execution.updated", views.execution(row))
    return row


def current_query(room_id: str, agent_id: str) -> Select[Execution]:
    """The newest open execution of the agent in the room, read from the partial index of the open
    ones (migration 0016): the executions it ended before are neither read nor sorted."""
    return (
        select(Execution)
        .where(Execution.room_id == room_id, Execution.agent_id == agent_id, OPEN_EXECUTION)
        .order_by(Execution.created_at.desc())
        .limit(1)
    )


async def move(tx: Tx, row: Execution, status: str, reason: str = "", *, turn: bool = False) -> None:
    """Set the status (and why); a final execution never changes again."""
    if row.status in FINAL or (row.status, row.reason, turn) == (status, reason, False):
        return
    row.status, row.reason, row.updated_at = status, reason, now()
    if turn:
        row.turns += 1
    await tx.emit(row.room_id, "execution.updated", views.execution(row))
    if status in FINAL and (row.parent_execution_id is not None or row.handoff_to is not None):
        tx.ended.append(row)  # once this commits: its parent is woken, its open child canceled


async def open_child(tx: Tx, parent: Execution, agent_id: str) -> Execution:
    """A new execution of `agent_id` for the work `parent` hands it (submitted): the agent's newest
    open one, so the handoff's delivery runs in it."""
    row = Execution(
        id=new_id(),
        room_id=parent.room_id,
        agent_id=agent_id,
        status=ExecutionStatus.SUBMITTED,
        reason="",
        parent_execution_id=parent.id,
        created_at=now(),
    )
    tx.session.add(row)
    await tx.session.flush()
    await tx.emit(row.room_id, "execution.updated", views.execution(row))
    return row


async def lineage(tx: Tx, row: Execution) -> list[Execution]:
    """The row and the executions it works for, parent after child, up to the first (a chain's
    length is bounded: each link was refused if it closed a loop)."""
    found = [row]
    while found[-1].parent_execution_id is not None and len(found) <= MAX_LINEAGE:
        parent = await tx.session.get(Execution, found[-1].parent_execution_id)
        if parent is None:
            break
        found.append(parent)
    return found


MAX_LINEAGE = 64
"""Links of a handoff chain read back at most."""


async def children(session: AsyncSession, parent_id: str) -> list[Execution]:
    """The executions `parent_id` handed work to, oldest first."""
    rows = await session.scalars(
        select(Execution).where(Execution.parent_execution_id == parent_id).order_by(Execution.created_at)
    )
    return list(rows.all())


async def project(tx: Tx, row: Execution, task: Task, *, turn: bool = False) -> None:
    """Bring the row in line with its task."""
    await move(tx, row, status_of(task), reason_of(task), turn=turn)


async def fresh(tx: Tx, execution_id: str) -> Execution | None:
    """The row as it is now (another transaction may have moved it)."""
    return await tx.session.get(Execution, execution_id)


async def follow_tasks(bus: Bus, tasks: dict[str, Task]) -> None:
    """The rows of the executions of `tasks` (by id) follow them: each room's in a transaction of
    that room, so its events keep the room's order."""
    if not tasks:
        return
    async with bus.sessions() as session:
        found = await session.execute(
            select(Execution.id, Execution.room_id).where(Execution.id.in_(list(tasks)))
        )
        by_room: dict[str, list[str]] = {}
        for execution_id, room_id in found.all():
            by_room.setdefault(room_id, []).append(execution_id)
    for room_id, ids in by_room.items():
        async with bus.transaction(room_id) as tx:
            for row in (await tx.session.scalars(select(Execution).where(Execution.id.in_(ids)))).all():
                await project(tx, row, tasks[row.id])


async def recover(tx: Tx, alive: set[str], runner: str) -> tuple[list[Delivery], list[Delivery]]:
    """The deliveries of replicas that are gone (not in `alive`): those such a replica was running are
    closed (and returned first: their turns may have ended without their room being told); those it
    had queued become `runner`'s and are returned to be handled, in order. Deliveries of live
    replicas are theirs: a replica starting next to them touches none. (The rows of the tasks the
    engine failed follow them first: `follow_tasks`.)"""
    orphaned = or_(Delivery.runner.is_(None), Delivery.runner.not_in(alive))
    running = select(Delivery).where(Delivery.status == DeliveryStatus.RUNNING, orphaned)
    closed = list((await tx.session.scalars(running)).all())
    await tx.session.execute(
        update(Delivery)
        .where(Delivery.status == DeliveryStatus.RUNNING, orphaned)
        .values(status=DeliveryStatus.DONE),
        execution_options={"synchronize_session": False},
    )
    waiting = (
        select(Delivery.id)
        .where(Delivery.status == DeliveryStatus.PENDING, orphaned)
        .order_by(Delivery.message_seq)
    )
    claimed: list[str] = []
    for delivery_id in (await tx.session.scalars(waiting)).all():
        taken = await tx.session.execute(  # when replicas look at once, each delivery goes to one
            update(Delivery)
            .where(Delivery.id == delivery_id, Delivery.status == DeliveryStatus.PENDING, orphaned)
            .values(runner=runner),
            execution_options={"synchronize_session": False},
        )
        if taken.rowcount:  # type: ignore[attr-defined]
            claimed.append(delivery_id)
    mine = select(Delivery).where(Delivery.id.in_(claimed)).order_by(Delivery.message_seq)
    return closed, list((await tx.session.scalars(mine)).all())
