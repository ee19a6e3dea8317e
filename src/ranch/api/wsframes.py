"""A room event's WebSocket frame, built once, written straight to each idle watcher's socket.

Through the ASGI `websocket.send`, every watcher of an event costs a task wake-up (its writer),
Starlette's WebSocket object, uvicorn's protocol and the `websockets` framing: seconds of server
CPU for a room of 10,000 watchers (bench/README.md, watchers). A
server frame (FIN, text opcode, unmasked, length, payload; ranch serves no compression) is the same
bytes for every watcher, so `text_frame` builds it once per event and `DirectSocket` writes those
bytes to a connection's transport itself, while its writer task waits for work (rooms/watchers.py).

`DirectSocket.of` recognises uvicorn's `websockets-sansio` protocol, the one `ranch serve` runs
(uvicorn's `auto` picks it when `websockets` is installed), behind Starlette's pass-through
wrappers of `send`, with no extension negotiated; anything else (another server, another wrapper,
a test transport, compression) gets None and keeps the ASGI path. A frame goes direct only while the
protocol would send it at once itself: open, not closing, nothing unsent (a transport paused by flow
control holds unsent bytes). Otherwise `DirectSocket` declines (None) and the frame goes through the
writer as before, queued behind nothing: the writer's `send` waits for the socket to drain while
later frames queue, bounded by the watcher's own limits. `RANCH_WS_DIRECT=off` turns the direct
path off.
"""

from __future__ import annotations

import logging
import os
import struct
from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from ranch.rooms.watchers import WATCHER_BYTES, Outgoing, is_new

ENV = "RANCH_WS_DIRECT"
BUFFER_BYTES = WATCHER_BYTES
"""Bytes a connection's transport may hold unsent before its watcher is closed as too slow (1013):
the byte bound of a watcher's own queue, which a direct write bypasses. The direct path declines
while anything is unsent, and the writer waits out flow control (64 KiB by default), so this bound
holds where that does not (a transport whose high-water mark was raised)."""
PASS_THROUGH = "starlette._exception_handler"
"""The module of Starlette's `sender`, which wraps `send` only to note an HTTP response's start."""
WRAPPERS = 8
"""Wrappers looked through, at most."""
TEXT = 0x81
"""FIN and the text opcode: a whole text message in one frame."""

logger = logging.getLogger(__name__)
written = 0
"""Frames this process wrote directly (the tests read it)."""


def text_frame(data: bytes) -> bytes:
    """A server's unmasked, uncompressed WebSocket frame carrying the UTF-8 text `data` whole."""
    size = len(data)
    if size < 126:
        head = bytes((TEXT, size))
    elif size < 65536:
        head = struct.pack("!BBH", TEXT, 126, size)
    else:
        head = struct.pack("!BBQ", TEXT, 127, size)
    return head + data


def enabled() -> bool:
    """Whether new connections take the direct path (`RANCH_WS_DIRECT`, on unless off)."""
    return os.environ.get(ENV, "on").lower() not in ("off", "0", "false", "no")


def _sender(send: Any) -> WebSocketsSansIOProtocol | None:
    """The uvicorn protocol whose own `send` the ASGI `send` is, seen through Starlette's exception
    wrappers (they pass every WebSocket message on unchanged); None for anything else: a wrapper
    that could change or count what is sent must see every frame, so those keep the ASGI path."""
    for _ in range(WRAPPERS):
        owner = getattr(send, "__self__", None)
        if owner is not None:
            own = isinstance(owner, WebSocketsSansIOProtocol) and send.__func__ is type(owner).send
            return owner if own else None
        if getattr(send, "__module__", None) != PASS_THROUGH or getattr(send, "__name__", None) != "sender":
            return None
        cells = dict(zip(send.__code__.co_freevars, send.__closure__ or (), strict=True))
        if "send" not in cells:
            return None
        send = cells["send"].cell_contents
    return None


class DirectSocket:
    """Writes a watcher's frames to its connection's transport, skipping its writer task.

    Called with a frame while the watcher's writer waits (nothing queued, no replay going on):
    True when it was written (or is not for this watcher: not new to its cursors, as the writer
    would drop it), False when the connection holds more than BUFFER_BYTES unsent or its transport
    refused the write (the caller closes the watcher, 1013: its client resumes from its cursors),
    None when the frame must go through the writer (the socket holds unsent bytes, or is closing).

    It is called once a watcher for each event of a room, ten thousand times in a row, each
    after a system call that leaves the caches cold: it reads as few objects as it can (the
    protocol's `close_sent`, the transport, the watcher's cursors). What uvicorn's protocol would
    check besides is implied by those: a lost connection's transport is closing; the protocol
    closes its transport when the client's close frame arrives (so `conn.state` is OPEN while
    neither is set); and a transport paused by flow control holds unsent bytes (it resumes below
    its low-water mark), so frames go to the writer, which waits for the socket to drain.
    """

    __slots__ = ("_protocol", "_rooms", "_transport")

    def __init__(self, protocol: WebSocketsSansIOProtocol, rooms: dict[str, int]) -> None:
        self._protocol = protocol
        self._transport = protocol.transport
        self._rooms = rooms

    @classmethod
    def of(cls, send: Any, rooms: dict[str, int]) -> DirectSocket | None:
        """The direct writer of the connection whose ASGI `send` is `send`, once accepted; None when
        it is not a protocol known here, or frames on it are not plain (an extension was negotiated).
        `rooms` are the watcher's cursors (`Watcher.rooms`): a frame goes out if new to them
        (rooms/watchers.py `is_new`), which counts it sent."""
        protocol = _sender(send)
        if protocol is None or not enabled():
            return None
        if not protocol.handshake_complete or protocol.conn.extensions:
            return None
        return cls(protocol, rooms)

    def __call__(self, frame: Outgoing) -> bool | None:
        global written
        transport = self._transport
        if self._protocol.close_sent or transport.is_closing():
            return None
        unsent = transport.get_write_buffer_size()
        if unsent:
            return False if unsent > BUFFER_BYTES else None
        if not is_new(self._rooms, frame.room, frame.cursor):
            return True
        wire = frame.wire
        if wire is None:
            assert frame.text is not None  # notes to the writer are never offered here
            wire = frame.wire = text_frame(frame.text.encode())
        try:
            transport.write(wire)
        except Exception:  # the transport would not take it: close the watcher, its client resumes
            logger.warning("a direct WebSocket write failed; closing the connection", exc_info=True)
            return False
        written += 1
        return True
