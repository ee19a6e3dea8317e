"""Reading a room's log (its events, its messages) in pages bounded in rows and in bytes.

A room may hold hundreds of messages of 100 KB each, and a reader (a WebSocket replay, the relay,
a REST page, an agent's inbox) must never hold all of them at once. Each page first asks the
database only for the rows' sizes, keeps the longest run that fits in the byte budget, and then
reads just those rows; a single row larger than the budget comes alone, so every page moves on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, String, cast, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from ranch.db.models import RoomEvent, RoomMessage

PAGE_ROWS = 100
"""Rows a page holds at most."""
PAGE_BYTES = 2 * 1024 * 1024
"""Bytes (of stored JSON and text) a page holds at most, unless its first row alone is larger."""


def json_size(column: Any) -> ColumnElement[int]:
    """The size of a JSON column as stored (ASCII JSON text: characters are bytes), 0 for NULL."""
    return func.coalesce(func.length(cast(column, String)), 0)


def message_size() -> ColumnElement[int]:
    """A stored message's size: its text and its parts' JSON."""
    return func.coalesce(func.length(RoomMessage.text), 0) + json_size(RoomMessage.parts)


def fitting(sizes: Sequence[int], max_bytes: int) -> int:
    """How many of the rows of `sizes`, oldest first, fit in `max_bytes` together (the first always
    does: a page is never empty while rows remain)."""
    total = 0
    for count, size in enumerate(sizes):
        total += size
        if count and total > max_bytes:
            return count
    return len(sizes)


async def event_page(
    session: AsyncSession,
    room: str,
    after: int,
    *,
    upto: int | None = None,
    rows: int = PAGE_ROWS,
    max_bytes: int = PAGE_BYTES,
) -> tuple[list[RoomEvent], bool]:
    """The room's events after the cursor `after` (up to the cursor `upto`, if given), oldest first,
    at most `rows` of them and `max_bytes` of data; and whether more may follow (the page is full in
    rows or was cut by bytes), so a reader stops without asking for an empty page."""
    where = [RoomEvent.room_id == room, RoomEvent.cursor > after]
    if upto is not None:
        where.append(RoomEvent.cursor <= upto)
    sized = select(RoomEvent.cursor, json_size(RoomEvent.data)).where(*where).order_by(RoomEvent.cursor)
    found = (await session.execute(sized.limit(rows))).all()
    count = fitting([size for _cursor, size in found], max_bytes)
    if not count:
        return [], False
    edge = found[count - 1][0]  # within `upto`: the page's only upper bound, so the index range ends
    # there (SQLite bounds an index range by one of two upper bounds, and may take `upto`'s: every
    # event up to the room's newest read and filtered, a cost growing with the room's history)
    query = (
        select(RoomEvent)
        .where(RoomEvent.room_id == room, RoomEvent.cursor > after, RoomEvent.cursor <= edge)
        .order_by(RoomEvent.cursor)
    )
    page = list((await session.scalars(query)).all())
    return page, count < len(found) or len(found) == rows
