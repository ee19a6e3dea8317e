"""A watcher of rooms: one WebSocket's queue of encoded frames, bounded in frames and in bytes.

An event is encoded once (`encoded`), and the same text is queued for every watcher of its room:
ten thousand watchers cost one `orjson.dumps`, and a queue's size is that encoding's. A watcher too
slow to keep up is closed (its queue is full in frames or in bytes) and reconnects with its cursors,
losing nothing; the bus (rooms/bus.py) fans events out to watchers.

An idle watcher holds as little as it can: no queue (a frame offered while its writer waits is
handed over at once, and a queue is made only while frames pile up), and one bare future while its
writer waits. anyio's memory stream and Event cost about 10 KiB a connection; at 10,000 watchers
that is 100 MB.

While a watcher's writer waits (nothing queued, no replay going on), a frame may skip it: a
connection that can write a frame straight to its socket sets `direct` (api/wsframes.py), and the
bus's offer goes there at once, so one event to ten thousand idle watchers wakes no task. Whatever
`direct` declines (a paused or closing socket) goes through the writer as before, and so does
everything offered while the writer is busy: nothing written directly overtakes a queued frame.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson

from ranch.exceptions import Unauthorized
from ranch.identity.principal import Principal

WATCHER_BUFFER = 1024
"""Frames a watcher may fall behind by before it is closed (it reconnects with its cursor)."""
WATCHER_BYTES = 8 * 1024 * 1024
"""Bytes of frames (as JSON) a watcher may fall behind by before it is closed, whatever their count."""

Direct = Callable[["Outgoing"], "bool | None"]
"""Writes a frame to a connection's socket at once: True (written, or not for it), False (too far
behind: close it), None (not now: the writer sends it)."""


UNCOUNTED = ("delivery", "error")
"""Frames of a room that are not its events: an agent's deliveries, a room lost. They are sent
whatever the watcher's cursor of the room."""


def counted(payload: dict[str, Any]) -> tuple[str | None, int | None]:
    """The room whose cursor a frame is checked against and its cursor: (None, None) for a frame of
    no room or not one of its events, a None cursor for an event that is not stored (streamed text)."""
    room = payload.get("room_id")
    if room is None or payload.get("type") in UNCOUNTED:
        return None, None
    return room, payload.get("cursor")


def is_new(rooms: dict[str, int], room: str | None, cursor: int | None) -> bool:
    """Whether a frame of `room` at `cursor` (from `counted`) is new to a watcher following `rooms`
    (room id -> the last cursor sent), counting it sent: replay and live events are deduplicated by
    cursor, and a room the watcher no longer follows gets nothing."""
    if room is None:
        return True  # replies to the client's frames, an agent's deliveries, a room lost
    last = rooms.get(room)
    if last is None:
        return False
    if cursor is None:
        return True
    if cursor <= last:
        return False
    rooms[room] = cursor
    return True


class Outgoing:
    """A frame as it goes out: its payload, and its JSON text made once for every watcher it is
    queued for (None: a note from a connection's reader to its writer, never sent)."""

    __slots__ = ("cursor", "payload", "room", "size", "text", "wire")

    def __init__(self, payload: dict[str, Any], text: str | None, size: int) -> None:
        self.payload = payload
        self.text = text
        self.size = size
        """Bytes of its UTF-8 text: what it costs a watcher's queue."""
        self.wire: bytes | None = None
        """Its WebSocket frame, made by the first direct write and shared by every other one."""
        self.room, self.cursor = counted(payload) if text is not None else (None, None)
        """What each watcher's cursors are checked against (`is_new`), read once for all of them."""


def encoded(payload: dict[str, Any]) -> Outgoing:
    """`payload` encoded once, to be queued for any number of watchers."""
    data = orjson.dumps(payload)
    return Outgoing(payload, data.decode(), len(data))


def note(payload: dict[str, Any]) -> Outgoing:
    """A note from a connection's reader to its writer (subscribe, close): queued in order, never sent."""
    return Outgoing(payload, None, 0)


class Watcher:
    """One WebSocket (or in-process reader) listening to some rooms; an agent's also gets its
    deliveries. The bus offers it frames (`offer`); its one writer takes them in order (`next`)."""

    __slots__ = (
        "_bytes",
        "_queue",
        "_waiter",
        "agent_id",
        "closed",
        "direct",
        "ended",
        "fell_behind",
        "principal",
        "rooms",
    )

    def __init__(self, agent_id: str | None = None, principal: Principal | None = None) -> None:
        self.agent_id = agent_id
        self.principal = principal
        """Whose connection it is: removed from a room, it stops getting the room's events."""
        self.rooms: dict[str, int] = {}
        """Room id -> the last cursor sent for it (replay and live events are deduplicated with it);
        the bus changes it (`subscribe`, `unsubscribe`), keeping its index of each room's watchers."""
        self.closed = False
        """No more frames: it was closed (too slow, or its connection ended)."""
        self.fell_behind = False
        """It was closed because its queue was full: its client reconnects with its cursors (1013)."""
        self.ended: Unauthorized | None = None
        """Set when its key is revoked or expires: nothing more is sent but this error."""
        self._queue: deque[Outgoing] | None = None
        self._bytes = 0
        self._waiter: asyncio.Future[Outgoing | None] | None = None
        self.direct: Direct | None = None
        """Its connection's direct writer, if it has one (used only while its writer waits)."""

    def offer(self, frame: Outgoing) -> bool:
        """Queue `frame` at once (while its writer waits, hand it over, or write it with `direct`);
        False when the watcher is closed or the frame would put it too far behind (in frames or in
        bytes, or in its socket's unsent bytes): the caller closes it."""
        if self.closed:
            return False
        waiter = self._waiter
        if waiter is not None and not waiter.done():  # its writer waits: nothing is queued before it
            direct = self.direct
            if direct is not None and frame.text is not None and self.ended is None:
                written = direct(frame)
                if written is not None:
                    return written
            self._waiter = None  # hand the frame over
            waiter.set_result(frame)
            return True
        queue = self._queue
        if self._bytes + frame.size > WATCHER_BYTES or (queue is not None and len(queue) >= WATCHER_BUFFER):
            return False
        if queue is None:
            queue = self._queue = deque()
        queue.append(frame)
        self._bytes += frame.size
        return True

    def fresh(self, frame: Outgoing) -> bool:
        """True if `frame` is new to this watcher (not already sent in its backlog): it counts sent."""
        return is_new(self.rooms, frame.room, frame.cursor)

    def fresh_event(self, payload: dict[str, Any]) -> bool:
        """`fresh` for an event read back from the table (a replay's)."""
        return is_new(self.rooms, *counted(payload))

    async def next(self) -> Outgoing | None:
        """The next frame, waiting for one; None once the watcher is closed or its key ended (what
        was still queued is dropped: its client resumes from the last cursor it got)."""
        while self.ended is None and not self.closed:
            queue = self._queue
            if queue:
                frame = queue.popleft()
                self._bytes -= frame.size
                if not queue:
                    self._queue = None  # idle again: hold nothing
                return frame
            waiter: asyncio.Future[Outgoing | None] = asyncio.get_running_loop().create_future()
            self._waiter = waiter
            try:
                handed = await waiter
            finally:
                self._waiter = None
            if handed is not None and self.ended is None and not self.closed:
                return handed
        return None

    @property
    def receive(self) -> AsyncIterator[dict[str, Any]]:
        """Its frames' payloads in order until it is closed (`async for`; a reader in this process)."""
        return self._payloads()

    async def _payloads(self) -> AsyncIterator[dict[str, Any]]:
        while (frame := await self.next()) is not None:
            yield frame.payload

    def close(self) -> None:
        """No more frames; its writer stops (what was queued is dropped)."""
        self.closed = True
        self.direct = None
        self._queue = None
        self._bytes = 0
        self._wake()

    def end(self, reason: Unauthorized) -> None:
        """Its key ended: its writer sends nothing more but `reason`."""
        self.ended = reason
        self._wake()

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
