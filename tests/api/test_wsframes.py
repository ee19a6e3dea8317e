"""A room event's frame built once by ranch is the frame the `websockets` library sends and reads.

The direct fan-out (api/wsframes.py) writes its own WebSocket frames instead of going through
uvicorn's protocol and the `websockets` library's framing. Each frame must be exactly what that
library would have sent for the same text (the same bytes), and its own parser, as a client runs
it, must read it back as that text: at the edges of the three length encodings, and in any script.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any, cast

import pytest
from websockets.frames import Frame, Opcode
from websockets.protocol import Protocol, Side, State
from websockets.server import ServerProtocol
from websockets.sync.client import connect as ws_connect

from _support.servers import ServerThread
from ranch.api.wsframes import BUFFER_BYTES, DirectSocket, text_frame
from ranch.rooms.watchers import Outgoing, Watcher, encoded

SIZES = [0, 1, 125, 126, 127, 65535, 65536, 65537, 300_000]
"""Payload lengths around the 7-bit, 16-bit and 64-bit length forms."""


def text_of(size: int) -> str:
    """`size` bytes of UTF-8 mixing one- to four-byte characters (padded with ASCII)."""
    pattern = 'é€🐄 "rooms" ü\\n'
    text = ""
    while len((text + pattern).encode()) <= size:
        text += pattern
    return text + "x" * (size - len(text.encode()))


def library_frame(data: bytes) -> bytes:
    """What the `websockets` server protocol (uvicorn's `websockets-sansio`) sends for `data`."""
    server = ServerProtocol()
    server.state = State.OPEN
    server.send_text(data)
    return b"".join(server.data_to_send())


def read_as_client(wire: bytes) -> list[Frame]:
    """`wire` as a client of the `websockets` library parses it (unmasked, UTF-8 checked)."""
    client = Protocol(Side.CLIENT, state=State.OPEN, max_size=None)
    client.receive_data(wire)
    assert client.parser_exc is None, client.parser_exc
    return [event for event in client.events_received() if isinstance(event, Frame)]


@pytest.mark.parametrize("size", SIZES)
def test_a_frame_is_the_bytes_the_websockets_library_sends_for_the_same_text(size: int) -> None:
    data = text_of(size).encode()
    assert len(data) == size
    assert text_frame(data) == library_frame(data)


@pytest.mark.parametrize("size", SIZES)
def test_a_client_reads_each_frame_back_as_exactly_its_text(size: int) -> None:
    text = text_of(size)
    frames = read_as_client(text_frame(text.encode()) + text_frame(b'{"type":"pong"}'))
    assert [(f.opcode, f.fin) for f in frames] == [(Opcode.TEXT, True)] * 2
    assert bytes(frames[0].data).decode() == text
    assert bytes(frames[1].data) == b'{"type":"pong"}'


class FakeTransport:
    """What the direct path asks of a transport: whether it closes, its unsent bytes, the bytes written."""

    def __init__(self) -> None:
        self.sent = b""
        self.unsent = 0
        self.refuses = False
        self.closing = False

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return self.unsent

    def write(self, data: bytes) -> None:
        if self.refuses:
            raise RuntimeError("the handle is closed")
        self.sent += data


class FakeProtocol:
    """uvicorn's sansio protocol as the direct path reads it: whether it sent its close, its transport."""

    def __init__(self) -> None:
        self.transport = FakeTransport()
        self.close_sent = False


async def idle(watcher: Watcher) -> asyncio.Task[Outgoing | None]:
    """Its writer, waiting for a frame."""
    writer = asyncio.ensure_future(watcher.next())
    await asyncio.sleep(0)
    assert not writer.done()
    return writer


def direct(watcher: Watcher) -> FakeProtocol:
    protocol = FakeProtocol()
    watcher.direct = DirectSocket(cast(Any, protocol), watcher.rooms)
    return protocol


def event(cursor: int | None, room: str = "r", kind: str = "message.created") -> Outgoing:
    return encoded({"type": kind, "room_id": room, "cursor": cursor})


@pytest.mark.anyio
async def test_an_idle_watchers_new_frames_go_to_its_socket_until_bytes_wait_then_to_its_writer() -> None:
    watcher = Watcher()
    watcher.rooms["r"] = 0
    protocol = direct(watcher)
    writer = await idle(watcher)
    first = event(1)
    for offered in (first, event(1), event(2, room="other")):
        assert watcher.offer(offered)  # the last two are not new to it: dropped, as the writer would
    assert protocol.transport.sent == text_frame(first.text.encode() if first.text else b"")
    assert watcher.rooms == {"r": 1} and not writer.done()
    streamed, lost = event(None, kind="message.delta"), event(1, kind="error")
    assert watcher.offer(streamed) and watcher.offer(lost)  # no cursor to check: both go out
    assert protocol.transport.sent.endswith(
        text_frame(f"{streamed.text}".encode()) + text_frame(f"{lost.text}".encode())
    )
    protocol.transport.unsent = 1  # bytes wait in the transport (its flow control may have paused it)
    queued = event(2)
    assert watcher.offer(queued)
    assert await writer is queued  # the writer sends it, after those bytes
    assert watcher.rooms == {"r": 1}, "handed to the writer, it was not counted sent"
    assert watcher.fresh(queued) and not watcher.fresh(queued)
    watcher.close()


@pytest.mark.anyio
@pytest.mark.parametrize("closing", ["close_sent", "transport"])
async def test_a_closing_connections_frames_go_through_its_writer(closing: str) -> None:
    watcher = Watcher()
    watcher.rooms["r"] = 0
    protocol = direct(watcher)
    if closing == "close_sent":
        protocol.close_sent = True  # the server sent its close frame: nothing may follow it
    else:
        protocol.transport.closing = True  # lost, or the client's close was answered
    writer = await idle(watcher)
    offered = event(1)
    assert watcher.offer(offered)
    assert await writer is offered and protocol.transport.sent == b""
    watcher.close()


@pytest.mark.anyio
async def test_a_watcher_whose_socket_holds_too_much_or_refuses_a_write_is_closed_as_too_slow() -> None:
    for refuses in (False, True):
        watcher = Watcher()
        protocol = direct(watcher)
        if refuses:
            protocol.transport.refuses = True
        else:
            protocol.transport.unsent = BUFFER_BYTES + 1
        writer = await idle(watcher)
        assert not watcher.offer(encoded({"type": "pong"}))  # the bus closes it: 1013, it resumes
        assert protocol.transport.sent == b""
        watcher.close()
        assert await writer is None


class Closings:
    """An ASGI app that accepts a WebSocket, takes its direct writer, and once the client has gone
    (its close frame, or its socket shut) notes what a direct write of an event would do then."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, bool | None]] = []
        self.done = threading.Event()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        assert (await receive())["type"] == "websocket.connect"
        await send({"type": "websocket.accept"})
        rooms = {"r": 0}
        socket = DirectSocket.of(send, rooms)
        assert socket is not None, "uvicorn's websockets-sansio protocol, as `ranch serve` runs it"
        gone = await receive()
        protocol = socket._protocol
        state = "open" if protocol.conn.state is State.OPEN and not protocol.disconnected else "closing"
        self.seen.append((f"{gone['type']} {state}", socket(event(1))))
        self.done.set()


@pytest.mark.parametrize("how", ["close frame", "socket shut"])
def test_once_a_client_has_gone_a_direct_write_is_declined_by_a_real_uvicorn_protocol(how: str) -> None:
    """What `DirectSocket` leaves unchecked (the `websockets` connection's state, uvicorn's
    `disconnected`) follows from what it checks, in the uvicorn that runs it."""
    app = Closings()
    with ServerThread(app) as server:
        client = ws_connect(f"ws://127.0.0.1:{server.port}/", open_timeout=10, compression=None)
        if how == "close frame":
            client.close()
        else:
            client.socket.shutdown(socket.SHUT_RDWR)
            client.socket.close()
        assert app.done.wait(10)
    assert app.seen == [("websocket.disconnect closing", None)]
