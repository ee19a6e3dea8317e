"""A TCP proxy on 127.0.0.1 that puts a database "1 ms away": each chunk waits `delay` ms each way.

`python -m bench.latency UPSTREAM_PORT [--delay-ms 1]` listens on a free port of 127.0.0.1,
prints it on one line, and forwards every connection to 127.0.0.1:UPSTREAM_PORT. Every chunk
read from either side is written to the other `delay` ms after it was read, chunks of one
direction in the order they came (a queue per direction), so a round trip through it costs
2 x `delay` more, as a database one network hop away does. It runs in its own process so its
event loop does not share the benchmark's; `proxy()` starts it for the length of a block.

asyncio's own loop, not uvloop: uvloop's timers count whole milliseconds. Even so, a timer wakes
on the selector's millisecond tick, so a chunk waits between `delay` and about `delay` + 1 ms;
`round_trip_ms` measures what the proxy really adds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

from bench.common import HOST, ROOT, median, stop

HIGH_WATER = 1 << 20
"""Bytes one side may have read and not yet forwarded before the proxy stops reading it."""
_joins: set[asyncio.Task[None]] = set()


class Side(asyncio.Protocol):
    """One end of a proxied connection: what it reads goes to its peer `delay` s later, in order.

    Chunks wait in a queue with the time they are due; one timer per side sends every chunk due at
    once, as one write, so a burst costs one wake-up. A client's side (`upstream` set) reads nothing
    until its upstream connection is open.
    """

    def __init__(self, delay: float, upstream: int | None = None) -> None:
        self.delay = delay
        self.upstream = upstream
        self.transport: asyncio.Transport | None = None
        self.peer: Side | None = None
        self.pending: deque[tuple[float, bytes]] = deque()
        self.waiting = 0
        """Bytes in `pending`."""
        self.timer: asyncio.TimerHandle | None = None
        self.ended = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        if self.upstream is not None:
            self.transport.pause_reading()
            join = asyncio.get_running_loop().create_task(self.join(self.upstream))
            _joins.add(join)
            join.add_done_callback(_joins.discard)

    async def join(self, upstream: int) -> None:
        loop = asyncio.get_running_loop()
        try:
            _transport, server = await loop.create_connection(lambda: Side(self.delay), HOST, upstream)
        except OSError:
            self.close()
            return
        self.peer, server.peer = server, self
        if self.transport is not None and not self.ended:
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        loop = asyncio.get_running_loop()
        self.pending.append((loop.time() + self.delay, data))
        self.waiting += len(data)
        if self.waiting > HIGH_WATER and self.transport is not None:
            self.transport.pause_reading()
        if self.timer is None:
            self.timer = loop.call_at(self.pending[0][0], self.forward)

    def forward(self) -> None:
        """Send the peer every chunk due by now, as one write; wake again for the next."""
        self.timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        due = []
        while self.pending and self.pending[0][0] <= now:
            due.append(self.pending.popleft()[1])
        if due and self.peer is not None and self.peer.transport is not None:
            data = b"".join(due)
            self.waiting -= len(data)
            self.peer.transport.write(data)
            if self.waiting <= HIGH_WATER and self.transport is not None and not self.ended:
                self.transport.resume_reading()
        if self.pending:
            self.timer = loop.call_at(self.pending[0][0], self.forward)
        elif self.ended and self.peer is not None:
            self.peer.close()  # all this side sent has gone through: the other ends too

    def eof_received(self) -> bool:
        self.connection_lost(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self.ended:
            return
        self.ended = True
        if not self.pending and self.peer is not None:
            self.peer.close()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def serve(upstream: int, delay: float) -> None:
    loop = asyncio.get_running_loop()
    listener = await loop.create_server(lambda: Side(delay, upstream), HOST, 0, backlog=1024)
    print(listener.sockets[0].getsockname()[1], flush=True)
    async with listener:
        await listener.serve_forever()


@dataclass
class Proxy:
    port: int
    pid: int


@contextlib.contextmanager
def proxy(upstream: int, delay_ms: float = 1.0) -> Iterator[Proxy]:
    """A latency proxy to 127.0.0.1:`upstream` in its own process, until the block ends."""
    command = [sys.executable, "-m", "bench.latency", str(upstream), "--delay-ms", str(delay_ms)]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # the port, once it listens (or "" if it died)
        if not line.strip().isdigit():
            raise SystemExit(f"the latency proxy did not start: {line!r}")
        yield Proxy(int(line), process.pid)
    finally:
        stop(process)


def round_trip_ms(dsn: str, count: int = 50) -> float:
    """The median ms of `SELECT 1` over one connection to `dsn` (asyncpg), after a warm-up."""
    import asyncpg

    async def run() -> float:
        connection = await asyncpg.connect(dsn, timeout=10)
        try:
            times = []
            for _ in range(count + 5):
                started = time.perf_counter()
                await connection.fetchval("SELECT 1")
                times.append((time.perf_counter() - started) * 1000)
            return median(times[5:])
        finally:
            await connection.close()

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("upstream", type=int, help="port on 127.0.0.1 to forward to")
    parser.add_argument("--delay-ms", type=float, default=1.0, help="added to each chunk, each way")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.upstream, args.delay_ms / 1000))


if __name__ == "__main__":
    main()
