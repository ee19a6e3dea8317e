"""`python -m bench.watchers` (in `python -m bench fanout`): N WebSocket watchers of one room, N up to 10k.

One `ranch serve` process (as deployed: SQLite, its log and access log to a file, rate limits
off, the per-address connection cap raised above N), pinned to one core; one room that wakes no
agent. The watchers grow from one size to the next: the benchmark opens the new ones (raw asyncio
protocols in this process doing the WebSocket handshake and frame parsing themselves: lighter per
connection than a WebSocket library), each subscribing to the room, and waits until
every one has its `subscribed` answer. Then a person posts `--posts` messages, one at a time; the
latency of one watcher is the time from just before the POST is written to the moment the frame
carrying that message's `message.created` is read (the time is taken as the bytes arrive; the
frames are parsed right away, which is cheap next to what the server does per frame).

The subscription uses per-room cursors (`{"type": "subscribe", "rooms": {"room": cursor}}`); if
the server answers that with an error, the older form (`"rooms": ["room"], "cursor": n`) is used
for every watcher, and the table says which. Server RSS per watcher: growth of the server's RSS
from the first watcher subscribed to all N, over N - 1. Server CPU per delivery: the server's
CPU over the posts, over N x posts. The client's CPU per delivery is shown too: when it nears the
server's, the client is the limit, not the server.

Events reach idle watchers by the direct path (api/wsframes.py); `--compare` first measures a
server with it off (`RANCH_WS_DIRECT=off`: each watcher's writer task sends through
`websocket.send`), in the same run, one server after the other, and the table's *fan-out* column
says which is which.

The open-files limit of this process (and so of the server it starts) is raised toward the hard
limit; a size that does not fit under it is skipped and said so. Everything binds and connects to
127.0.0.1; every loop is bounded in count and seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import os
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import httpx
import orjson

from bench.common import (
    HOST,
    LOAD_CPUS,
    SERVER_CPUS,
    cpu_seconds,
    free_port,
    host_load,
    percentile,
    raise_open_files,
    read_body,
    read_head,
    rss_kib,
    server_process,
    table,
)

ADMIN_KEY = "rk_bench_watchers_admin"
CONFIG = """
agents:
  - {id: echo, kind: echo}
"""
SIZES = (1000, 5000, 10000)
POSTS = 5
CONNECT_BATCH = 200
"""Handshakes in flight at once; the rest queue behind them (the listen backlog is finite)."""
WAIT = 60.0
"""Seconds for one post to reach every watcher; opening watchers gets this plus OPEN_SECONDS each."""
OPEN_SECONDS = 0.02
SPARE_FILES = 512
"""Open files kept beyond the watchers (the server's database, log, listening socket...)."""

TEXT, BINARY, CLOSE, PING, PONG = 0x1, 0x2, 0x8, 0x9, 0xA


def client_frame(opcode: int, payload: bytes) -> bytes:
    """One masked client frame (RFC 6455 5.3: a client masks everything it sends)."""
    mask = os.urandom(4)
    size = len(payload)
    if size < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | size)
    elif size < 65536:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, size)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, size)
    key = int.from_bytes(mask * (size // 4 + 1), "big") >> (8 * (4 - size % 4))
    masked = (int.from_bytes(payload, "big") ^ key).to_bytes(size, "big") if size else b""
    return head + mask + masked


@dataclass
class Round:
    """What every watcher waits for now: the token of the current post, and who has it."""

    token: bytes = b""
    arrived: list[float] = field(default_factory=list)
    expected: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def start(self, token: bytes, expected: int) -> None:
        self.token, self.arrived, self.expected = token, [], expected
        self.done = asyncio.Event()

    def got(self, at: float) -> None:
        self.arrived.append(at)
        if len(self.arrived) >= self.expected:
            self.done.set()


@dataclass
class Shared:
    """What all watchers share: the room, the subscribe form in use, what went wrong, the post awaited."""

    room: str
    new_form: bool = True
    errors: list[str] = field(default_factory=list)
    round: Round = field(default_factory=Round)

    def subscribe_frame(self, new_form: bool) -> bytes:
        """Subscribe from the room's start (its few events before the posts are replayed)."""
        if new_form:
            frame: dict[str, object] = {"type": "subscribe", "rooms": {self.room: 0}}
        else:
            frame = {"type": "subscribe", "rooms": [self.room], "cursor": 0}
        return client_frame(TEXT, orjson.dumps(frame))


class Watcher(asyncio.Protocol):
    """One WebSocket subscribed to the room: notes when each post's `message.created` arrives."""

    def __init__(self, port: int, shared: Shared) -> None:
        self.shared = shared
        self.port = port
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.opened = False
        self.subscribed = False
        self.form = shared.new_form
        self.closed: str | None = None
        self.fragments: list[bytes] = []
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        """Done once the server answered `subscribed`, or the watcher failed."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is one, unregistered
        key = base64.b64encode(os.urandom(16)).decode()
        self.transport.write(
            (
                f"GET /api/v1/ws?token={ADMIN_KEY} HTTP/1.1\r\nHost: {HOST}:{self.port}\r\n"
                "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )

    def data_received(self, data: bytes) -> None:
        at = time.perf_counter()
        self.buffer += data
        if not self.opened:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            status = bytes(self.buffer[: self.buffer.find(b"\r\n")])
            del self.buffer[: end + 4]
            if b" 101 " not in status + b" ":
                self._fail(f"handshake: {status!r}")
                return
            self.opened = True
            self._send(self.shared.subscribe_frame(self.form))
        self._frames(at)

    def _frames(self, at: float) -> None:
        buffer = self.buffer
        while len(buffer) >= 2:
            first, second = buffer[0], buffer[1]
            size, start = second & 0x7F, 2
            if size == 126:
                if len(buffer) < 4:
                    return
                size, start = struct.unpack_from("!H", buffer, 2)[0], 4
            elif size == 127:
                if len(buffer) < 10:
                    return
                size, start = struct.unpack_from("!Q", buffer, 2)[0], 10
            if len(buffer) < start + size:
                return
            payload = bytes(buffer[start : start + size])
            del buffer[: start + size]
            self._frame(first & 0x0F, bool(first & 0x80), payload, at)

    def _frame(self, opcode: int, final: bool, payload: bytes, at: float) -> None:
        if opcode == PING:
            self._send(client_frame(PONG, payload))
        elif opcode == CLOSE:
            code = struct.unpack_from("!H", payload)[0] if len(payload) >= 2 else 1005
            self._fail(f"closed by the server: {code} {payload[2:]!r}")
        elif opcode in (TEXT, BINARY, 0x0):  # JSON either way (a server may send its bytes as binary)
            self.fragments.append(payload)
            if final:
                message, self.fragments = b"".join(self.fragments), []
                self._message(message, at)

    def _message(self, message: bytes, at: float) -> None:
        current = self.shared.round
        if current.token and current.token in message and b'"message.created"' in message:
            current.got(at)
            return
        if self.subscribed:
            return
        kind = orjson.loads(message).get("type")
        if kind == "subscribed":
            self.subscribed = True
            if not self.ready.done():
                self.ready.set_result(None)
        elif kind == "error" and self.form:  # no per-room cursors here: the older form, for everyone
            self.form = self.shared.new_form = False
            self._send(self.shared.subscribe_frame(False))
        elif kind == "error":
            self._fail(f"subscribe refused: {message[:300]!r}")

    def _send(self, frame: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(frame)

    def _fail(self, why: str) -> None:
        if self.closed is None:
            self.closed = why
            self.shared.errors.append(why)
        if not self.ready.done():
            self.ready.set_result(None)
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.closed is None:
            self._fail(f"connection lost: {exc!r}")

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.closed = "closed by the benchmark"
            self.transport.write(client_frame(CLOSE, struct.pack("!H", 1000)))
            self.transport.close()


@dataclass
class Result:
    size: int
    form: str
    subscribe_seconds: float
    got: int
    deliveries: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    kib_per_watcher: float
    server_cpu_us: float
    client_cpu_us: float
    errors: list[str]
    path: str = "direct"
    """How the events reached idle watchers (PATHS)."""


async def open_watchers(port: int, shared: Shared, count: int, into: list[Watcher]) -> None:
    """Open `count` more watchers, at most CONNECT_BATCH handshakes and subscriptions at once, and
    wait until each is subscribed or failed (WAIT at most for all)."""
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(CONNECT_BATCH)

    async def one() -> None:
        async with gate:
            watcher = Watcher(port, shared)
            try:
                await loop.create_connection(lambda: watcher, HOST, port)
            except OSError as exc:
                shared.errors.append(f"connect: {exc!r}")
                return
            into.append(watcher)
            await watcher.ready

    budget = WAIT + OPEN_SECONDS * count
    starts = [asyncio.create_task(one()) for _ in range(count)]
    _done, late = await asyncio.wait(starts, timeout=budget) if starts else (set(), set())
    for start in late:
        start.cancel()
    await asyncio.gather(*starts, return_exceptions=True)
    if late:
        shared.errors.append(f"{len(late)} watchers not subscribed within {budget:g} s")
        for watcher in into:
            if not watcher.subscribed:
                watcher.close()  # not counted, and not left to subscribe while the posts are timed


async def post(port: int, room: str, text: str) -> float:
    """POST one message as the admin; the perf_counter just before it was written."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        body = orjson.dumps({"text": text})
        head = (
            f"POST /api/v1/rooms/{room}/messages HTTP/1.1\r\nHost: {HOST}\r\nX-API-Key: {ADMIN_KEY}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        sent = time.perf_counter()
        writer.write(head.encode() + body)
        status, headers = await asyncio.wait_for(read_head(reader), timeout=WAIT)
        answer = await asyncio.wait_for(read_body(reader, headers), timeout=WAIT)
        if status != 201:
            raise SystemExit(f"the post failed: HTTP {status} {answer[:300]!r}")
        return sent
    finally:
        writer.close()


def client_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def start_profile(pid: int, output: Path) -> subprocess.Popen[bytes]:
    """py-spy recording the server (raw format) until `stop_profile`."""
    command = [str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(pid), "--nonblocking"]
    command += ["-f", "raw", "-o", str(output)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_profile(spy: subprocess.Popen[bytes]) -> None:
    spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
    try:
        spy.wait(timeout=WAIT)
    except subprocess.TimeoutExpired:
        spy.kill()


async def measure(
    port: int, pid: int, room: str, sizes: list[int], posts: int, profile: Path | None = None
) -> list[Result]:
    shared = Shared(room)
    watchers: list[Watcher] = []
    await open_watchers(port, shared, 1, watchers)  # alone: it settles the subscribe form for all
    baseline = rss_kib(pid)  # after the first connection's one-off costs (imports, caches)
    results = []
    for size in sizes:
        started = time.perf_counter()
        await open_watchers(port, shared, size - len(watchers), watchers)
        subscribed = time.perf_counter() - started
        live = [w for w in watchers if w.closed is None and w.subscribed]
        if not live:
            raise SystemExit(f"no watcher subscribed: {shared.errors[:3]}")
        kib = (rss_kib(pid) - baseline) / max(size - 1, 1)
        latencies: list[float] = []
        spy = start_profile(pid, profile) if profile is not None and size == sizes[-1] else None
        server, client = cpu_seconds(pid), client_cpu()
        for n in range(posts):
            token = f"post {size}-{n} {uuid.uuid4().hex[:8]}"
            shared.round.start(token.encode(), len(live))
            sent = await post(port, room, token)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(shared.round.done.wait(), timeout=WAIT)
            latencies += [(at - sent) * 1000 for at in shared.round.arrived]
            shared.round.token = b""
        server, client = cpu_seconds(pid) - server, client_cpu() - client
        if spy is not None:
            stop_profile(spy)
        deliveries = max(len(live) * posts, 1)
        results.append(
            Result(
                size=size,
                form="per-room cursors" if shared.new_form else "one cursor (old form)",
                subscribe_seconds=subscribed,
                got=len(live),
                deliveries=len(latencies),
                p50_ms=percentile(latencies, 0.5),
                p99_ms=percentile(latencies, 0.99),
                max_ms=max(latencies, default=0.0),
                kib_per_watcher=kib,
                server_cpu_us=server * 1e6 / deliveries,
                client_cpu_us=client * 1e6 / deliveries,
                errors=list(dict.fromkeys(shared.errors))[:3],
            )
        )
    for watcher in watchers:
        watcher.close()
    await asyncio.sleep(0)  # let the close frames go out before the loop ends
    return results


def make_room(url: str) -> str:
    with httpx.Client(base_url=f"{url}/api/v1", headers={"X-API-Key": ADMIN_KEY}, timeout=30) as client:
        response = client.post("/rooms", json={"title": "watched"})
        response.raise_for_status()
        return str(response.json()["id"])


@contextlib.contextmanager
def pinned_here(cpus: set[int] | None) -> Iterator[None]:
    """Run this process on `cpus` for the block (the server has the others), then as before."""
    if cpus is None or not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def run_loop(main: Callable[[], Coroutine[Any, Any, list[Result]]]) -> list[Result]:
    """Run the client on uvloop when it is installed (cheaper per socket), else asyncio's loop."""
    try:
        import uvloop

        factory: Callable[[], asyncio.AbstractEventLoop] | None = uvloop.new_event_loop
    except ImportError:
        factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main())


def render(results: list[Result], posts: int, skipped: str, load: str) -> str:
    rows = [
        [
            r.size,
            r.path,
            r.form,
            f"{r.got}/{r.size}",
            f"{r.deliveries}/{r.got * posts}",
            f"{r.subscribe_seconds:.1f}",
            f"{r.p50_ms:.1f}",
            f"{r.p99_ms:.1f}",
            f"{r.max_ms:.1f}",
            f"{r.kib_per_watcher:.1f}",
            f"{r.server_cpu_us:.1f}",
            f"{r.client_cpu_us:.1f}",
        ]
        for r in results
    ]
    header = [
        "watchers",
        "fan-out",
        "subscribe",
        "subscribed",
        "got",
        "open + subscribe s",
        "post -> p50 ms",
        "post -> p99 ms",
        "post -> max ms",
        "server KiB/watcher",
        "server CPU µs/delivery",
        "client CPU µs/delivery",
    ]
    note = (
        f"One `ranch serve` (SQLite, as deployed, pinned to one core), one room; N WebSocket watchers "
        f"(raw asyncio, this process, on the other cores) subscribed to it, grown from one size to the "
        f"next. {posts} posts, one at a time; latency from just before each POST to each watcher reading "
        "its `message.created` (percentiles over every watcher and post). KiB per watcher: server RSS "
        "growth from the first watcher to N, over N - 1. *fan-out*: `direct`, the bus writes each event's "
        "frame, built once, to every idle watcher's socket; `writer task` (`RANCH_WS_DIRECT=off`, its own "
        "server), each watcher's task sends it through `websocket.send`. Targets: p99 <= 250 ms at 10k; "
        f"<= 32 KiB per idle watcher.{load}"
    )
    text = table("WebSocket watchers of one room", header, rows, note)
    problems = [f"N={r.size}: {e}" for r in results for e in r.errors]
    if problems:
        text += "\nErrors: " + "; ".join(problems) + "\n"
    if skipped:
        text += "\n" + skipped + "\n"
    return text


PATHS = {"direct": "on", "writer task": "off"}
"""How a room's event reaches an idle watcher's socket, and `RANCH_WS_DIRECT` for it: written
straight to it by the bus (api/wsframes.py), or through the watcher's writer task and the ASGI
`websocket.send` (as before the direct path, and still for a busy watcher)."""


def serve_and_measure(
    sizes: list[int], posts: int, profile: Path | None, path: str, spare: int
) -> list[Result]:
    """One `ranch serve` taking `path` to its watchers, measured at each of `sizes`."""
    with tempfile.TemporaryDirectory(prefix="ranch-watchers-") as tmp:
        folder = Path(tmp)
        config = folder / "watchers.yaml"
        config.write_text(CONFIG)
        port = free_port()
        command = [sys.executable, "-m", "ranch", "serve", str(config), "--port", str(port)]
        command += ["--db", f"sqlite+aiosqlite:///{folder / 'watchers.db'}", "--caller-rate", "off"]
        command += ["--agent-rate", "off", "--max-connections-per-address", str(spare)]
        url = f"http://{HOST}:{port}"
        env = {"RANCH_ADMIN_KEY": ADMIN_KEY, "RANCH_WS_DIRECT": PATHS[path]}
        log = folder / "server.log"
        with server_process(
            command, f"{url}/healthz", timeout=60, quiet=True, env=env, log=log, cpus=SERVER_CPUS
        ) as server:
            room = make_room(url)
            with pinned_here(LOAD_CPUS):
                results = run_loop(lambda: measure(port, server.pid, room, sizes, posts, profile))
    for result in results:
        result.path = path
    return results


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="bench.watchers", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="watcher counts, growing")
    parser.add_argument("--posts", type=int, default=POSTS, help="posts measured per size")
    parser.add_argument(
        "--profile", type=Path, help="py-spy raw profile of the server over the largest N's posts"
    )
    parser.add_argument(
        "--compare",
        action="store_true",
        help="also measure a server with the direct path off (RANCH_WS_DIRECT=off), first, in this run",
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: 3 then 10 watchers, 2 posts")
    args = parser.parse_args(argv or [])
    if args.quick:
        args.sizes, args.posts = [3, 10], 2
    sizes = sorted(set(args.sizes))
    limit = raise_open_files(max(sizes) + SPARE_FILES)
    fits = [size for size in sizes if size + SPARE_FILES <= limit]
    skipped = ""
    if len(fits) < len(sizes):
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        skipped = (
            f"Skipped {', '.join(str(s) for s in sizes if s not in fits)} watchers: the open-files limit "
            f"is {limit} (hard limit {hard}); raise it (ulimit -Hn) to measure them."
        )
    results: list[Result] = []
    before = host_load()
    paths = ["writer task", "direct"] if args.compare else ["direct"]
    if fits:
        for path in paths:
            profile = args.profile if path == paths[-1] else None
            results += serve_and_measure(fits, args.posts, profile, path, max(sizes) + SPARE_FILES)
    load = f" Host load (1-minute average): {before:.1f} at the start, {host_load():.1f} at the end."
    text = render(results, args.posts, skipped, load)
    print(text)
    return text


if __name__ == "__main__":
    main(sys.argv[1:])
