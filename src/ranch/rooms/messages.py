"""A room's messages as callers see them: posting one, and reading the room's log in cursor windows.

A post is checked (size, parts, the agents it would wake take its parts) before its transaction,
then written through the `MessageWriter` in the room's commit queue (rooms/commits.py), where
posts into busy rooms share their transactions.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any, TypeVar

from a2a.types import Message, Part
from anyio.abc import TaskGroup
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from ranch.agents.base import check_input
from ranch.catalog.registry import Registry
from ranch.db.models import (
    Delivery,
    DeliveryStatus,
    ExecutionStatus,
    MessageType,
    RoomEvent,
    RoomMessage,
    RoomStatus,
)
from ranch.exceptions import Conflict, NotFound, PayloadTooLarge
from ranch.identity.principal import Principal
from ranch.policy.limits import Limits, check_id, check_message, check_value_keys
from ranch.rooms import executions
from ranch.rooms import parts as room_parts
from ranch.rooms.access import Seat, seat, seats_of, visible_room
from ranch.rooms.bus import NewEvent, Tx, frame
from ranch.rooms.commits import Ahead, RoomCommits
from ranch.rooms.mentions import mentioned
from ranch.rooms.pages import PAGE_BYTES, fitting, json_size, message_size
from ranch.rooms.requests import PostMessage
from ranch.rooms.writing import MessageWriter, own_names, present_of, woken
from ranch.wire.events import COMPLETED, INPUT_REQUIRED

Logged = TypeVar("Logged", RoomMessage, RoomEvent)
"""A room's log, read in cursor windows: its messages or its events."""


class RoomMessages:
    """Posts into rooms, and the rooms' messages and events read back."""

    def __init__(
        self, writer: MessageWriter, registry: Registry, group: TaskGroup, limits: Limits | None = None
    ) -> None:
        self.writer = writer
        self.bus = writer.bus
        self.registry = registry
        self.commits = RoomCommits(writer.bus, group)
        """Posts into a busy room share its transactions (rooms/commits.py)."""
        self.limits = limits or Limits()

    async def post(self, principal: Principal, room_id: str, request: PostMessage) -> dict[str, Any]:
        """A person's or an agent's message, as the API shows it; wakes the agents it addresses."""
        metadata = request.metadata or {}
        given = room_parts.converted(request.parts or [], self.limits)
        parts = ([Part(text=request.text)] if request.text is not None else []) + given
        self._check_content(parts, given, metadata, request.thread_id)
        if any(part.WhichOneof("content") != "text" for part in given):
            await self._check_takers(principal, room_id, request, given)

        async def check(tx: Tx) -> Seat:
            found = await seat(tx.session, principal, room_id)
            if found.room.status != RoomStatus.ACTIVE:
                raise Conflict(f"room '{room_id}' is {found.room.status}", "room_id")
            if request.reply_to is not None:  # refused before anything is written, else marked answered
                await _answer(tx.session, principal, room_id, request.reply_to)
            return found

        async def apply(tx: Tx, found: Seat) -> NewEvent:
            message = await self.writer.write(
                tx,
                found.room,
                found.sender_kind,
                principal.id,
                parts=parts,
                kind=request.type,
                mentions=request.mentions or [],
                metadata=metadata,
                thread_id=request.thread_id,
                execution_id=found.working,
            )
            if found.working is not None:  # an external agent answering: its execution is idle again
                row = await executions.fresh(tx, found.working)
                if row is not None:  # (work handed to it: its answer ends it)
                    child = row.parent_execution_id is not None
                    state, status = (
                        (COMPLETED, ExecutionStatus.COMPLETED)
                        if child
                        else (INPUT_REQUIRED, ExecutionStatus.READY)
                    )
                    await executions.move(tx, row, status, turn=True)
                    tx.later.append(partial(self.writer.record, row, state, status, message.text))
            return tx.created[message.id]

        ahead = Ahead("seats", _seats, principal) if principal.kind == "user" else None
        created = await self.commits.write(room_id, check, apply, ahead=ahead)
        return created.shown()

    async def _check_takers(
        self, principal: Principal, room_id: str, request: PostMessage, given: list[Part]
    ) -> None:
        """Refuse `given` parts an agent the post would wake does not take (UnsupportedContent naming
        `parts[i]`), before the post's transaction: a remote agent's modes may need its card fetched,
        and no room waits on that."""
        async with self.bus.sessions() as session:
            room = await visible_room(session, principal, room_id)
            wakes = request.type == MessageType.TEXT
            names = mentioned(request.text or "", list(request.mentions or [])) if wakes else []
            sender_kind = "user" if principal.kind == "user" else "agent"
            present = await present_of(session, room, names, sender_kind)
            targets = woken(room, own_names(room.org_id, names, present), sender_kind, principal.id, present)
        for target in targets:
            if target in self.registry:  # external agents read what they get over the API
                await check_input(self.registry.get(target), given, "parts")

    def _check_content(
        self, parts: list[Part], given: list[Part], metadata: dict[str, Any], thread: str | None
    ) -> None:
        """The same limits as every A2A entry: size (a file's bytes counted once decoded), the
        `parts` given (the model checked the text), metadata keys, ids."""
        meta_size = len(json.dumps(metadata, ensure_ascii=False).encode()) if metadata else len(b"{}")
        size = Message(parts=parts).ByteSize() + meta_size
        if size > self.limits.max_message_bytes:
            raise PayloadTooLarge(size, self.limits.max_message_bytes, "parts" if given else "text")
        if given:  # (a message of no parts passes every check: a plain text post skips building one)
            check_message(Message(parts=given), self.limits, field="")
        if metadata:
            check_value_keys(metadata, "metadata", self.limits)
        if thread is not None:
            check_id(thread, "thread_id", self.limits)

    # -- reading -------------------------------------------------------------------------------

    async def messages(
        self, principal: Principal, room_id: str, since: int, limit: int, before: int | None = None
    ) -> tuple[list[RoomMessage], bool]:
        """The room's messages after the cursor `since`, oldest first (or the newest before `before`),
        and whether the page's byte bound left some of `limit` out."""
        return await self._window(principal, room_id, RoomMessage, since, before, limit)

    async def events(
        self, principal: Principal, room_id: str, since: int, limit: int, before: int | None = None
    ) -> tuple[list[dict[str, Any]], bool]:
        """The room's events after the cursor `since`, oldest first (or the newest before `before`),
        and whether the page's byte bound left some of `limit` out."""
        rows, cut = await self._window(principal, room_id, RoomEvent, since, before, limit)
        return [frame(row) for row in rows], cut

    async def message_part(
        self, principal: Principal, room_id: str, message_id: str, index: int
    ) -> dict[str, Any]:
        """The stored file part `index` (counting every stored part, text included) of a message, as
        A2A JSON with its `raw` bytes: what a view's file link reads. Participant-only, like the
        room's pages; NotFound naming `message_id`, or `index` for a part that holds no bytes."""
        async with self.bus.sessions() as session:
            await visible_room(session, principal, room_id)
            query = select(RoomMessage.parts).where(
                RoomMessage.room_id == room_id, RoomMessage.id == message_id
            )
            found = (await session.execute(query)).first()
        if found is None:
            raise NotFound(f"no message '{message_id}' in room '{room_id}'", "message_id")
        stored: list[dict[str, Any]] = found[0] or []  # None: one plain text part
        if not 0 <= index < len(stored) or "raw" not in stored[index]:
            raise NotFound(f"message '{message_id}' has no file part with bytes at index {index}", "index")
        return stored[index]

    async def _window(
        self,
        principal: Principal,
        room_id: str,
        table: type[Logged],
        since: int,
        before: int | None,
        limit: int,
    ) -> tuple[list[Logged], bool]:
        """`limit` rows of the room's `table` after `since`; with `before`, the newest `limit` before
        it; oldest first either way. At most PAGE_BYTES of them (the first always; rooms/pages.py):
        True with them if that bound left rows out."""
        size = message_size() if table is RoomMessage else json_size(RoomEvent.data)
        key = table.seq if table is RoomMessage else RoomEvent.cursor  # a message's seq, an event's cursor
        order = key if before is None else key.desc()
        where = [table.room_id == room_id, key > since if before is None else key < before]
        async with self.bus.sessions() as session:
            await visible_room(session, principal, room_id)
            sizes = select(key, size).where(*where).order_by(order).limit(limit)
            sized = (await session.execute(sizes)).all()
            count = fitting([row_size for _seq, row_size in sized], PAGE_BYTES)
            if not count:
                return [], False
            edge = sized[count - 1][0]
            within = key <= edge if before is None else key >= edge
            rows = list((await session.scalars(select(table).where(*where, within).order_by(order))).all())
        return (rows if before is None else rows[::-1]), count < len(sized)


async def _answer(session: AsyncSession, principal: Principal, room_id: str, delivery_id: str) -> None:
    """Acknowledge the delivery a message answers, in the message's transaction: answered once."""
    row = await session.get(Delivery, delivery_id, with_for_update=True)
    if row is None or row.agent_id != principal.id or row.room_id != room_id:
        raise NotFound(
            f"no delivery '{delivery_id}' for agent '{principal.id}' in room '{room_id}'", "reply_to"
        )
    if row.status == DeliveryStatus.DONE:
        raise Conflict(f"delivery '{delivery_id}' was answered or acknowledged already", "reply_to")
    row.status = DeliveryStatus.DONE


async def _seats(tx: Tx, asked: list[tuple[Principal, str]]) -> None:
    await seats_of(tx.session, asked)
