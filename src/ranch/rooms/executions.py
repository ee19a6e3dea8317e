"""Execution state changes, each written with its `execution.updated` event."""

from __future__ import annotations

from sqlalchemy import select, update

from ranch.db.models import Delivery, Execution, now
from ranch.ids import new_id
from ranch.rooms import views
from ranch.rooms.adapters import FINAL
from ranch.rooms.bus import Tx


async def current(tx: Tx, room_id: str, agent_id: str) -> Execution:
    """The agent's open execution in the room, created (submitted) when there is none."""
    row = await tx.session.scalar(
        select(Execution)
        .where(Execution.room_id == room_id, Execution.agent_id == agent_id, Execution.status.not_in(FINAL))
        .order_by(Execution.created_at.desc())
        .limit(1)
    )
    if row is None:
        row = Execution(id=new_id(), room_id=room_id, agent_id=agent_id, status="submitted", reason="")
        tx.session.add(row)
        await tx.session.flush()
        await tx.emit(room_id, "execution.updated", views.execution(row))
    return row


async def move(tx: Tx, row: Execution, status: str, reason: str = "", *, turn: bool = False) -> None:
    """Set the status (and why); a final execution never changes again."""
    if row.status in FINAL:
        return
    row.status, row.reason, row.updated_at = status, reason, now()
    if turn:
        row.turns += 1
    await tx.emit(row.room_id, "execution.updated", views.execution(row))


async def recover(tx: Tx, external: set[str]) -> list[Delivery]:
    """After a restart: fail what was working, and return the deliveries still to handle (in order).

    External agents' executions stay working: their deliveries wait, unacknowledged, for them.
    """
    stopped = (
        await tx.session.scalars(
            select(Execution).where(Execution.status == "working", Execution.agent_id.not_in(external))
        )
    ).all()
    for row in stopped:
        await move(
            tx, row, "failed", "the server stopped while this execution was working; send the message again"
        )
    await tx.session.execute(update(Delivery).where(Delivery.status == "running").values(status="done"))
    return list(
        (
            await tx.session.scalars(
                select(Delivery).where(Delivery.status == "pending").order_by(Delivery.message_seq)
            )
        ).all()
    )
