"""One socket write per response: uvicorn's HTTP protocol with its writes gathered per loop tick.

uvicorn writes a response's status line and headers, then its body, as two `transport.write`
calls, and asyncio sends each at once: two `send` system calls for the commonest answer, the
largest single cost of a small request (bench/README.md). Here the protocol's transport gathers
the writes made in one tick of the event loop and sends them as one, at the end of that tick
(before the loop waits for anything), so a response costs one system call and nothing waits
longer than the tick that wrote it. A connection upgraded to a WebSocket writes on the plain
transport. Closing or aborting sends what is gathered first (abort
drops it, as abort drops the transport's own buffer). `ranch serve` runs with it unless
`RANCH_COALESCE_WRITES=off`; either way its connections are guarded (`ranch.edge.connections`).
"""

from __future__ import annotations

import asyncio
import os
from functools import partial
from typing import Any

from ranch.edge.connections import ConnectionLimits, GuardedHttpToolsProtocol

ENV = "RANCH_COALESCE_WRITES"
FLUSH_BYTES = 65_536
"""Bytes gathered in one tick past which they are sent at once (a stream's large events, a big body)."""


class GatheredWrites:
    """A transport whose writes in one loop tick go out as one write (the rest is the transport's)."""

    __slots__ = ("_held", "_loop", "_pending", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []
        self._held = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(bytes(data))
        self._held += len(data)
        if self._held >= FLUSH_BYTES:  # a large answer goes on at once: the transport's flow control
            self._flush()  # (pause_writing) sees it as it is written, as without gathering

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    @property
    def transport(self) -> asyncio.Transport:
        """The transport it writes to."""
        return self._transport

    def flush(self) -> None:
        """Send what is gathered now."""
        self._flush()

    def _flush(self) -> None:
        pending = self._pending
        if not pending:
            return
        self._pending, self._held = [], 0
        if not self._transport.is_closing():
            self._transport.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._pending, self._held = [], 0
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(len(data) for data in self._pending)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class GatheringHttpToolsProtocol(GuardedHttpToolsProtocol):
    """uvicorn's httptools protocol, guarded, on a `GatheredWrites` transport."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(GatheredWrites(transport, asyncio.get_running_loop()))  # type: ignore[arg-type]

    def handle_websocket_upgrade(self) -> None:
        """A WebSocket writes on the plain transport: its frames are one write each anyway, and a
        room's fan-out writes to thousands of sockets in one tick, where gathering would only add a
        callback per socket (bench/README.md, watchers)."""
        gathered = self.transport
        if isinstance(gathered, GatheredWrites):
            gathered.flush()
            self.transport = gathered.transport
        super().handle_websocket_upgrade()


def http_protocol(limits: ConnectionLimits = ConnectionLimits()) -> dict[str, Any]:  # noqa: B008
    """The `uvicorn.run` option that serves with it, guarded by `limits` (only guarded when
    switched off). A partial, not a class made here: `--workers` hands it to other processes."""
    off = os.environ.get(ENV, "on").lower() in ("off", "0", "false", "no")
    protocol = GuardedHttpToolsProtocol if off else GatheringHttpToolsProtocol
    return {"http": partial(protocol, limits=limits)}
