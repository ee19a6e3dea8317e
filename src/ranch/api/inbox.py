"""An external agent's inbox: its unacknowledged deliveries, over REST and on the WebSocket."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from ranch.db.models import Delivery, DeliveryStatus, RoomMessage
from ranch.exceptions import NotFound
from ranch.identity.principal import Principal
from ranch.rooms.views import DeliveryView


async def pending(
    sessions: async_sessionmaker[AsyncSession], agent_id: str, limit: int | None = None
) -> list[DeliveryView]:
    """The agent's deliveries waiting for an acknowledgement, oldest first."""
    async with sessions() as session:
        query = (
            select(Delivery)
            .where(Delivery.agent_id == agent_id, Delivery.status == DeliveryStatus.PENDING)
            .order_by(Delivery.message_seq)
            .limit(limit)
        )
        result = []
        for row in (await session.scalars(query)).all():
            message = await session.get(RoomMessage, row.message_seq)
            if message is not None:  # messages are never deleted without their room (and its deliveries)
                result.append(DeliveryView.of(row, message))
        return result


async def acknowledge(sessions: async_sessionmaker[AsyncSession], who: Principal, delivery_id: str) -> None:
    async with sessions() as session, session.begin():
        row = await session.get(Delivery, delivery_id)
        if row is None or row.agent_id != who.id:
            raise NotFound(f"no delivery '{delivery_id}' for agent '{who.id}'", "delivery_id")
        row.status = DeliveryStatus.DONE
