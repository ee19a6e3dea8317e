"""One ordered stream of room events: written with the change, then fanned out live.

Every change to a room (a message, an execution's status, a routing decision, a
participant) is written in the same transaction as its event row. The event's
`seq` is the cursor clients reconnect with, so it must grow in commit order:
writes go through one lock, held only for the short transaction (never while an
agent works): this process's lock, and on PostgreSQL a transaction-scoped advisory
lock that orders the writes of every replica (SQLite has one writer at a time).
After commit, events go to the watchers of their room; a watcher too slow to keep
up (its queue is bounded in frames and in bytes) is closed and reconnects with its
cursor, losing nothing. With replicas, events reach watchers through the relay
(rooms/relay.py), which reads them back in order.

A subscription never reads under the write lock: it registers the watcher and notes
the newest cursor handed out so far (everything after it reaches the watcher live),
then replays the backlog up to that cursor in bounded pages (rooms/pages.py), outside
the lock; replayed and live events are deduplicated by cursor (`accept`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import orjson
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from ranch.db.models import Delivery, RoomEvent, iso
from ranch.exceptions import NotFound, Unauthorized
from ranch.fanout import Fanout
from ranch.identity.principal import Principal
from ranch.rooms.pages import event_page
from ranch.rooms.relay import Relay
from ranch.wire.errors import rest_error_body

WATCHER_BUFFER = 1024
"""Frames a watcher may fall behind by before it is closed (it reconnects with its cursor)."""
WATCHER_BYTES = 8 * 1024 * 1024
"""Bytes of frames (as JSON) a watcher may fall behind by before it is closed, whatever their count."""
ROOM_WRITES_LOCK = 0x72616E6368
"""The PostgreSQL advisory lock key that orders room writes across replicas."""


def frame(event: RoomEvent) -> dict[str, Any]:
    """The wire form of a stored event (WebSocket frame and `GET .../events` item)."""
    return {
        "type": event.type,
        "room_id": event.room_id,
        "cursor": event.seq,
        "at": iso(event.created_at),
        "data": event.data,
    }


@dataclass
class Tx:
    """A write transaction; `emit` records an event that goes out once it commits."""

    session: AsyncSession
    events: list[RoomEvent] = field(default_factory=list)
    after: list[Callable[[], object]] = field(default_factory=list)
    """Run after commit, at once (waking a worker)."""
    later: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """Awaited after commit, in order, before the transaction block returns (work that writes
    elsewhere, such as the task store: SQLite allows one writer at a time)."""
    deliveries: list[Delivery] = field(default_factory=list)
    """Deliveries this transaction created (the A2A gateway waits on its own)."""

    async def emit(self, room_id: str, type: str, data: dict[str, Any]) -> RoomEvent:
        event = RoomEvent(room_id=room_id, type=type, data=data)
        self.session.add(event)
        await self.session.flush()  # assigns seq
        self.events.append(event)
        return event


def size_of(payload: dict[str, Any]) -> int:
    """A frame's size as JSON: what it costs a watcher's queue."""
    return len(orjson.dumps(payload))


@dataclass(eq=False)
class Queued:
    """The bytes a watcher's queue holds (shared by its two ends)."""

    bytes: int = 0
    limit: int = WATCHER_BYTES


@dataclass(eq=False)
class Outbox:
    """The sending end of a watcher's queue: bounded in frames and in bytes."""

    stream: MemoryObjectSendStream[tuple[dict[str, Any], int]]
    queued: Queued

    def send_nowait(self, payload: dict[str, Any], size: int | None = None) -> None:
        """Queue a frame at once, or raise anyio.WouldBlock: the queue is full in frames or bytes."""
        size = size_of(payload) if size is None else size
        if self.queued.bytes + size > self.queued.limit:
            raise anyio.WouldBlock
        self.stream.send_nowait((payload, size))
        self.queued.bytes += size

    async def send(self, payload: dict[str, Any]) -> None:
        """Queue the connection's own frame (a reply), waiting for room in frames."""
        size = size_of(payload)
        await self.stream.send((payload, size))
        self.queued.bytes += size

    def close(self) -> None:
        self.stream.close()


@dataclass(eq=False)
class Inbox:
    """The receiving end of a watcher's queue: its frames in order, until the queue is closed."""

    stream: MemoryObjectReceiveStream[tuple[dict[str, Any], int]]
    queued: Queued

    def __aiter__(self) -> Inbox:
        return self

    async def __anext__(self) -> dict[str, Any]:
        try:
            payload, size = await self.stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None
        self.queued.bytes -= size
        return payload

    def close(self) -> None:
        self.stream.close()


@dataclass(eq=False)
class Watcher:
    """One WebSocket (or test) listening to some rooms; agents also get their deliveries."""

    send: Outbox
    receive: Inbox
    agent_id: str | None = None
    rooms: dict[str, int] = field(default_factory=dict)
    """Room id -> the last cursor sent for it (replay and live events are deduplicated with it)."""
    closed: bool = False
    principal: Principal | None = None
    """Whose connection it is: removed from a room, it stops getting the room's events."""
    ended: Unauthorized | None = None
    """Set when its key is revoked or expires: nothing more is sent but this error."""

    def left(self, room: str) -> bool:
        """Whether `room` is one this watcher's principal just lost (it is no longer followed)."""
        return self.rooms.pop(room, None) is not None


class Bus:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        *,
        fanout: Fanout | None = None,
        origin: str = "",
        postgres: bool = False,
    ) -> None:
        self.sessions = sessions
        self._lock = anyio.Lock()
        self._watchers: set[Watcher] = set()
        self._postgres = postgres
        self._relay = (
            Relay(
                sessions,
                fanout,
                origin,
                frame=frame,
                deliver=self._fan_out,
                to_agent=self._to_own_agent,
                watched=lambda: bool(self._watchers),
            )
            if fanout is not None and fanout.shared
            else None
        )

    async def relay(
        self,
        before_catch_up: Callable[[], Awaitable[None]] | None = None,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Share room events with the other replicas until cancelled (with none, nothing to do);
        `before_catch_up` runs before the events missed during a gap are handed out."""
        if self._relay is None:
            task_status.started()
            return
        self._relay.before_catch_up = before_catch_up
        await self._relay.run(task_status=task_status)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Tx]:
        async with self._lock:
            async with self.sessions() as session, session.begin():
                if self._postgres:
                    await session.execute(
                        text("SELECT pg_advisory_xact_lock(:key)"), {"key": ROOM_WRITES_LOCK}
                    )
                tx = Tx(session)
                yield tx
            if self._relay is None:
                for event in tx.events:
                    self._fan_out(frame(event))
            elif tx.events:
                self._relay.committed()
        for callback in tx.after:
            callback()
        for work in tx.later:
            await work()

    def live(self, room_id: str, type: str, data: dict[str, Any]) -> None:
        """An event that is not stored (streamed text): sent to current watchers only."""
        payload = {"type": type, "room_id": room_id, "cursor": None, "data": data}
        self._fan_out(payload)
        if self._relay is not None:
            self._relay.live(payload)

    def to_agent(self, agent_id: str, payload: dict[str, Any]) -> int:
        """Send a frame to every connection of an external agent (on every replica); how many here
        got it."""
        if self._relay is not None:
            self._relay.to_agent(agent_id, payload)
        return self._to_own_agent(agent_id, payload)

    def _to_own_agent(self, agent_id: str, payload: dict[str, Any]) -> int:
        sent = 0
        for watcher in list(self._watchers):
            if watcher.agent_id == agent_id and self._offer(watcher, payload):
                sent += 1
        return sent

    def watch(self, agent_id: str | None = None, principal: Principal | None = None) -> Watcher:
        send, receive = anyio.create_memory_object_stream[tuple[dict[str, Any], int]](WATCHER_BUFFER)
        queued = Queued()
        watcher = Watcher(Outbox(send, queued), Inbox(receive, queued), agent_id, principal=principal)
        self._watchers.add(watcher)
        return watcher

    def follow(self, watcher: Watcher, room: str) -> None:
        """Live events of `room` from now on, without a replay (call inside a transaction)."""
        watcher.rooms.setdefault(room, 0)

    def unwatch(self, watcher: Watcher) -> None:
        """The watcher's owner is done with it."""
        self._evict(watcher)
        watcher.receive.close()

    def _evict(self, watcher: Watcher) -> None:
        """No more frames; its reader drains what is queued, then sees the end."""
        self._watchers.discard(watcher)
        watcher.closed = True
        watcher.send.close()

    async def subscribe(self, watcher: Watcher, rooms: list[str], cursor: int) -> int:
        """Start live events for `rooms`; the cursor up to which their past comes from `replay`.

        Every event after the returned cursor reaches the watcher live, every one up to it is in
        the replay: registering and noting it happen together (under the write lock, with no
        read of the backlog; with replicas, at the relay's last handed-out event). The caller
        sends the replay before the live frames queued after this call.
        """
        if self._relay is not None:  # events reach watchers through the relay, in cursor order
            for room in rooms:
                watcher.rooms[room] = cursor
            return self._relay.handed_out
        async with self._lock:  # no write is between its commit and its fan-out
            for room in rooms:
                watcher.rooms[room] = cursor
            async with self.sessions() as session:
                return await session.scalar(select(func.coalesce(func.max(RoomEvent.seq), 0))) or 0

    async def backlog_size(self, rooms: Sequence[str], cursor: int, upto: int) -> int:
        """How many events `replay` will read."""
        async with self.sessions() as session:
            query = select(func.count()).where(
                RoomEvent.room_id.in_(list(rooms)), RoomEvent.seq > cursor, RoomEvent.seq <= upto
            )
            return await session.scalar(query) or 0

    async def replay(
        self, rooms: Sequence[str], cursor: int, upto: int
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """The events of `rooms` after `cursor` up to `upto`, in order, a bounded page at a time (read
        without the write lock; send each frame through `accept`, which drops what was sent live)."""
        while True:
            async with self.sessions() as session:
                rows = await event_page(session, cursor, rooms=rooms, upto=upto)
            if not rows:
                return
            cursor = rows[-1].seq
            yield [frame(row) for row in rows]

    def accept(self, watcher: Watcher, payload: dict[str, Any]) -> bool:
        """True if a live frame is new to this watcher (not already sent in its backlog)."""
        room = payload.get("room_id")
        if room is None or payload["type"] in ("delivery", "error"):
            return True  # replies to the client's frames, an agent's deliveries, a room lost
        if room not in watcher.rooms:
            return False
        cursor = payload.get("cursor")
        if cursor is None:
            return True
        if cursor <= watcher.rooms[room]:
            return False
        watcher.rooms[room] = cursor
        return True

    def _fan_out(self, payload: dict[str, Any]) -> None:
        room, size = payload["room_id"], None
        for watcher in list(self._watchers):
            if room in watcher.rooms:
                size = size_of(payload) if size is None else size
                self._offer(watcher, payload, size)
        if payload["type"] == "participant.left":  # in cursor order, on every replica (the relay)
            self._remove(room, payload["data"])

    def _remove(self, room: str, participant: dict[str, Any]) -> None:
        """The participant's watchers stop following `room` (nothing after its leaving reaches them)
        and are told so; an owner or admin of the organization still sees every room of it."""
        kind, ref = participant.get("kind"), participant.get("id")
        for watcher in list(self._watchers):
            who = watcher.principal
            if who is None or who.is_admin or who.id != ref or kind not in who.participant_kinds:
                continue
            if watcher.left(room):
                lost = NotFound(f"no room '{room}': you are no longer one of its participants", "room_id")
                self._offer(watcher, {"type": "error", "room_id": room, **rest_error_body(lost)})

    def _offer(self, watcher: Watcher, payload: dict[str, Any], size: int | None = None) -> bool:
        try:
            watcher.send.send_nowait(payload, size)
            return True
        except anyio.WouldBlock:  # too slow: close it; it reconnects with its cursor
            self._evict(watcher)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._watchers.discard(watcher)
        return False
