"""One ordered stream of room events: written with the change, then fanned out live.

Every change to a room (a message, an execution's status, a routing decision, a
participant) is written in the same transaction as its event row. The event's
`seq` is the cursor clients reconnect with, so it must grow in commit order:
writes go through one lock, held only for the short transaction (never while an
agent works): this process's lock, and on PostgreSQL a transaction-scoped advisory
lock that orders the writes of every replica (SQLite has one writer at a time).
After commit, events go to the watchers of their room; a watcher too slow to keep
up is closed and reconnects with its cursor, losing nothing. With replicas, events
reach watchers through the relay (rooms/relay.py), which reads them back in order.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from ranch.db.models import Delivery, RoomEvent, iso
from ranch.fanout import Fanout
from ranch.rooms.relay import Relay

WATCHER_BUFFER = 1024
"""Frames a watcher may fall behind by before it is closed (it reconnects with its cursor)."""
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


@dataclass(eq=False)
class Watcher:
    """One WebSocket (or test) listening to some rooms; agents also get their deliveries."""

    send: MemoryObjectSendStream[dict[str, Any]]
    receive: MemoryObjectReceiveStream[dict[str, Any]]
    agent_id: str | None = None
    rooms: dict[str, int] = field(default_factory=dict)
    """Room id -> the last cursor sent for it (replay and live events are deduplicated with it)."""
    closed: bool = False


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

    async def relay(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Share room events with the other replicas until cancelled (with none, nothing to do)."""
        if self._relay is None:
            task_status.started()
            return
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

    def watch(self, agent_id: str | None = None) -> Watcher:
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](WATCHER_BUFFER)
        watcher = Watcher(send, receive, agent_id)
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

    async def subscribe(self, watcher: Watcher, rooms: list[str], cursor: int) -> list[dict[str, Any]]:
        """Start live events for `rooms` and return what happened after `cursor`, in order.

        Registering and reading happen under the write lock, so every event is either
        in the backlog or fanned out afterwards, never both and never neither. The
        caller must send the backlog before the live frames queued after this call.
        """
        async with self._lock, self.sessions() as session:
            for room in rooms:
                watcher.rooms[room] = cursor
            rows = (
                await session.scalars(
                    select(RoomEvent)
                    .where(RoomEvent.room_id.in_(rooms), RoomEvent.seq > cursor)
                    .order_by(RoomEvent.seq)
                )
            ).all()
        backlog = []
        for row in rows:
            if row.seq > watcher.rooms[row.room_id]:
                watcher.rooms[row.room_id] = row.seq
                backlog.append(frame(row))
        return backlog

    def accept(self, watcher: Watcher, payload: dict[str, Any]) -> bool:
        """True if a live frame is new to this watcher (not already sent in its backlog)."""
        room = payload.get("room_id")
        if room is None or payload["type"] == "delivery":
            return True  # replies to the client's frames, and an agent's deliveries
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
        room = payload["room_id"]
        for watcher in list(self._watchers):
            if room in watcher.rooms:
                self._offer(watcher, payload)

    def _offer(self, watcher: Watcher, payload: dict[str, Any]) -> bool:
        try:
            watcher.send.send_nowait(payload)
            return True
        except anyio.WouldBlock:  # too slow: close it; it reconnects with its cursor
            self._evict(watcher)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._watchers.discard(watcher)
        return False
