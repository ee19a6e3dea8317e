"""One socket write per response: what `ranch serve` writes in one loop tick goes out as one write,
at the end of that tick, over a real socket; closing sends what was gathered first."""

from __future__ import annotations

import asyncio
import socket

import pytest

from ranch.edge.coalesce import ENV, GatheredWrites, GatheringHttpToolsProtocol, http_protocol
from ranch.edge.connections import GuardedHttpToolsProtocol


async def connected() -> tuple[asyncio.Transport, socket.socket]:
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
    return transport, theirs


async def read(peer: socket.socket) -> bytes:
    """What the peer gets next, b"" at the end of the stream; waits for it at most 10 s."""
    async with asyncio.timeout(10):
        return await asyncio.get_running_loop().sock_recv(peer, 65536)


def received(peer: socket.socket) -> bytes:
    try:
        return peer.recv(65536)
    except BlockingIOError:
        return b""


def test_writes_in_one_tick_leave_together_at_its_end() -> None:
    async def scenario() -> None:
        transport, peer = await connected()
        gathered = GatheredWrites(transport, asyncio.get_running_loop())
        gathered.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        gathered.write(memoryview(b"ok"))
        assert received(peer) == b""  # nothing sent while the tick that wrote is running
        assert gathered.get_write_buffer_size() == 40
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert received(peer) == b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
        gathered.write(b"last")
        gathered.close()  # what was gathered goes before the close
        assert await read(peer) == b"last"
        assert await read(peer) == b""  # then the end of the stream
        peer.close()

    asyncio.run(scenario())


def test_abort_drops_what_was_gathered() -> None:
    async def scenario() -> None:
        transport, peer = await connected()
        gathered = GatheredWrites(transport, asyncio.get_running_loop())
        gathered.write(b"never")
        gathered.abort()
        assert await read(peer) == b""  # the end of the stream, and nothing before it
        assert gathered.is_closing()  # the rest is the transport's own
        peer.close()

    asyncio.run(scenario())


def test_ranch_serve_uses_it_unless_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    assert http_protocol()["http"].func is GatheringHttpToolsProtocol
    monkeypatch.setenv(ENV, "off")  # uvicorn's own writes, its connections still guarded
    assert http_protocol()["http"].func is GuardedHttpToolsProtocol


def test_a_large_write_goes_at_once_so_flow_control_sees_it() -> None:
    async def scenario() -> None:
        transport, peer = await connected()
        gathered = GatheredWrites(transport, asyncio.get_running_loop())
        gathered.write(b"x" * 70_000)  # past FLUSH_BYTES: sent now, not at the end of the tick
        assert gathered.get_write_buffer_size() == transport.get_write_buffer_size()
        assert len(received(peer)) > 0
        peer.close()

    asyncio.run(scenario())
