"""A TCP proxy on 127.0.0.1 that a test can cut and restore: what a Redis restart, a failover or a
network element does to the connections going through it.

`cut()` resets every connection through it (SO_LINGER 0: the peers get RST, not FIN) and resets
each new one at once; `restore()` lets connections through again. It runs its own event loop in a
background thread, so sync tests (which drive `ranch serve` processes) use it as they are:

    with TcpProxy(6379) as proxy:        # 127.0.0.1:proxy.port -> 127.0.0.1:6379
        proxy.cut(); ...; proxy.restore()
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Self, TypeVar

from _support.servers import HOST

MAX_CONNECTIONS = 512
"""Connections open through the proxy at once; more are reset (a test is bounded, so is this)."""
CHUNK = 65536
T = TypeVar("T")


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with an RST: linger on, timeout 0."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.close()


class TcpProxy:
    """Forwards 127.0.0.1:`port` to 127.0.0.1:`target`; cut and restored on demand."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = 0
        self.cuts = 0
        self._cut = False
        self._pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="tcpproxy", daemon=True)

    def start(self, timeout: float = 5.0) -> Self:
        self._thread.start()
        self._server = self._call(asyncio.start_server(self._client, HOST, 0), timeout)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def cut(self, timeout: float = 5.0) -> None:
        """Reset every connection through the proxy, and every new one until `restore()`."""
        self._call(self._cut_all(), timeout)

    def restore(self, timeout: float = 5.0) -> None:
        self._call(self._restore(), timeout)

    @property
    def open_connections(self) -> int:
        return len(self._pairs)

    def stop(self, timeout: float = 5.0) -> None:
        if self._server is not None:
            self._call(self._close(), timeout)
            self._server = None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)
        self._loop.close()

    def _call(self, work: Coroutine[Any, Any, T], timeout: float) -> T:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout)

    async def _cut_all(self) -> None:
        self._cut = True
        self.cuts += 1
        for pair in list(self._pairs):
            for writer in pair:
                _reset(writer)

    async def _restore(self) -> None:
        self._cut = False

    async def _close(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._cut_all()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._cut or len(self._pairs) >= MAX_CONNECTIONS:
            _reset(writer)
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(HOST, self.target), 5)
        except (OSError, TimeoutError):
            _reset(writer)
            return
        pair = (writer, up_writer)
        self._pairs.add(pair)
        try:
            await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))
        finally:
            self._pairs.discard(pair)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(CHUNK):
                writer.write(data)
                await writer.drain()
        except (OSError, ConnectionError):
            pass
        finally:
            writer.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
