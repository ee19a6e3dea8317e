"""A room event's frame built once by ranch is the frame the `websockets` library sends and reads.

The direct fan-out (api/wsframes.py) writes its own WebSocket frames instead of going through
uvicorn's protocol and the `websockets` library's framing. Each frame must be exactly what that
library would have sent for the same text (the same bytes), and its own parser, as a client runs
it, must read it back as that text: at the edges of the three length encodings, and in any script.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from websockets.frames import Frame, Opcode
from websockets.protocol import Protocol, Side, State
from websockets.server import ServerProtocol

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
    """What the direct path asks of a transport: its unsent bytes, and the bytes written."""

    def __init__(self) -> None:
        self.sent = b""
        self.unsent = 0
        self.refuses = False

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return self.unsent

    def write(self, data: bytes) -> None:
        if self.refuses:
            raise RuntimeError("the handle is closed")
        self.sent += data


class FakeProtocol:
    """uvicorn's sansio protocol as the direct path reads it: open, its flow control, its transport."""

    def __init__(self) -> None:
        self.transport = FakeTransport()
        self.close_sent = self.disconnected = False
        self.writable = asyncio.Event()
        self.writable.set()
        self.conn = ServerProtocol()
        self.conn.state = State.OPEN


async def idle(watcher: Watcher) -> asyncio.Task[Outgoing | None]:
    """Its writer, waiting for a frame."""
    writer = asyncio.ensure_future(watcher.next())
    await asyncio.sleep(0)
    assert not writer.done()
    return writer


@pytest.mark.anyio
async def test_an_idle_watchers_frames_go_to_its_socket_until_it_is_paused_then_through_its_writer() -> None:
    protocol = FakeProtocol()
    watcher = Watcher()
    watcher.rooms["r"] = 0
    accepted: list[int] = []

    def accept(payload: dict[str, Any]) -> bool:
        if payload["cursor"] <= watcher.rooms["r"]:
            return False
        watcher.rooms["r"] = payload["cursor"]
        accepted.append(payload["cursor"])
        return True

    watcher.direct = DirectSocket(cast(Any, protocol), accept)
    writer = await idle(watcher)
    first, again = encoded({"room_id": "r", "cursor": 1}), encoded({"room_id": "r", "cursor": 1})
    assert watcher.offer(first) and watcher.offer(
        again
    )  # the second is not new: dropped, as the writer would
    assert protocol.transport.sent == text_frame(b'{"room_id":"r","cursor":1}')
    assert accepted == [1] and watcher.rooms == {"r": 1} and not writer.done()
    protocol.writable.clear()  # the socket's buffer is past its high-water mark
    paused = encoded({"room_id": "r", "cursor": 2})
    assert watcher.offer(paused)
    assert await writer is paused  # the writer sends it (and waits for the socket to drain)
    assert accepted == [1], "handed to the writer, it was not counted sent"
    watcher.close()


@pytest.mark.anyio
async def test_a_watcher_whose_socket_holds_too_much_or_refuses_a_write_is_closed_as_too_slow() -> None:
    for refuses in (False, True):
        protocol = FakeProtocol()
        if refuses:
            protocol.transport.refuses = True
        else:
            protocol.transport.unsent = BUFFER_BYTES + 1
        watcher = Watcher()
        watcher.direct = DirectSocket(cast(Any, protocol), lambda _payload: True)
        writer = await idle(watcher)
        assert not watcher.offer(encoded({"type": "pong"}))  # the bus closes it: 1013, it resumes
        assert protocol.transport.sent == b""
        watcher.close()
        assert await writer is None
