"""A watcher of rooms: one WebSocket's queue, bounded in frames and in bytes.

A watcher too slow to keep up is closed (its queue is full in frames or in bytes) and reconnects
with its cursors, losing nothing; the bus (rooms/bus.py) fans events out to watchers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio
import orjson
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ranch.exceptions import Unauthorized
from ranch.identity.principal import Principal

WATCHER_BUFFER = 1024
"""Frames a watcher may fall behind by before it is closed (it reconnects with its cursor)."""
WATCHER_BYTES = 8 * 1024 * 1024
"""Bytes of frames (as JSON) a watcher may fall behind by before it is closed, whatever their count."""


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
    """Room id -> the last cursor sent for it (replay and live events are deduplicated with it); the
    bus changes it (`subscribe`, `unsubscribe`), keeping its index of each room's watchers."""
    closed: bool = False
    principal: Principal | None = None
    """Whose connection it is: removed from a room, it stops getting the room's events."""
    ended: Unauthorized | None = None
    """Set when its key is revoked or expires: nothing more is sent but this error."""
