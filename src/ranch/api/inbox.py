"""An external agent's inbox: its unacknowledged deliveries, over REST and on the WebSocket.

An agent may have many deliveries waiting, each with a message of up to `max_message_bytes`:
they are read a page at a time (bounded in rows and bytes, rooms/pages.py), each page in two
queries (the sizes, then the deliveries with their messages), never one query per delivery.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from sqlalchemy import and_, or_, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from ranch.db.models import Delivery, DeliveryStatus, RoomMessage
from ranch.exceptions import NotFound
from ranch.identity.principal import Principal
from ranch.rooms.pages import PAGE_BYTES, PAGE_ROWS, fitting, message_size
from ranch.rooms.views import DeliveryView

Place = tuple[int, str]
"""A delivery's place in the inbox: its message's cursor, then its id."""


async def pending(
    sessions: async_sessionmaker[AsyncSession], agent_id: str, limit: int = PAGE_ROWS
) -> list[DeliveryView]:
    """The agent's oldest deliveries waiting for an acknowledgement, oldest first (one page)."""
    async with sessions() as session:
        return await _page(session, agent_id, (0, ""), limit, PAGE_BYTES)


async def pending_pages(
    sessions: async_sessionmaker[AsyncSession], agent_id: str, max_bytes: int = PAGE_BYTES
) -> AsyncIterator[list[DeliveryView]]:
    """Every delivery waiting for an acknowledgement, oldest first, a bounded page at a time."""
    after: Place = (0, "")
    while True:
        async with sessions() as session:
            page = await _page(session, agent_id, after, PAGE_ROWS, max_bytes)
        if not page:
            return
        last = page[-1]
        after = (last.message.cursor, last.delivery_id)
        yield page


async def _page(
    session: AsyncSession, agent_id: str, after: Place, rows: int, max_bytes: int
) -> list[DeliveryView]:
    """Up to `rows` deliveries after `after` whose messages fit in `max_bytes` (the first always)."""
    seq, delivery_id = after
    where = (
        Delivery.agent_id == agent_id,
        Delivery.status == DeliveryStatus.PENDING,
        or_(Delivery.message_seq > seq, and_(Delivery.message_seq == seq, Delivery.id > delivery_id)),
    )
    joined = RoomMessage.seq == Delivery.message_seq
    order = (Delivery.message_seq, Delivery.id)
    sized = select(message_size()).select_from(Delivery).join(RoomMessage, joined).where(*where)
    sized = sized.order_by(*order).limit(rows)
    count = fitting(list((await session.scalars(sized)).all()), max_bytes)
    query = select(Delivery, RoomMessage).join(RoomMessage, joined).where(*where).order_by(*order)
    found = (await session.execute(query.limit(count))).all() if count else []
    return [DeliveryView.of(delivery, message) for delivery, message in found]


async def acknowledge(sessions: async_sessionmaker[AsyncSession], who: Principal, delivery_id: str) -> None:
    async with sessions() as session, session.begin():
        row = await session.get(Delivery, delivery_id)
        if row is None or row.agent_id != who.id:
            raise NotFound(f"no delivery '{delivery_id}' for agent '{who.id}'", "delivery_id")
        row.status = DeliveryStatus.DONE
