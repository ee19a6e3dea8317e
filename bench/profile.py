"""`python -m bench.profile [--keys] [--under-load] [--posts]`: where one SendMessage to an echo agent
(or one plain room post) spends its time.

By default, in process: drives the ranch app through ASGI directly (no sockets, no
HTTP parser), so the profile shows only ranch and the libraries it calls; prints µs
per request and a pyinstrument call tree; `--keys` serves with `--auth keys` and presents the admin
key on every call. `--under-load [KIND]` samples a bench.wire
server (default `ranch`: `ranch serve` as deployed) with py-spy while bench.load drives it at c=32:
the whole server, uvicorn included.
`--posts [ROUNDS] [sqlite|postgres|postgres-1ms]`: in process, on a fresh database (default
SQLite; PostgreSQL at 127.0.0.1:5432, directly or through bench/latency.py's 1 ms proxy), 32 REST
posts at once into 16 rooms (as `bench rooms`'
busiest row) against 32 SendMessage calls at once, each caller presenting the admin key: CPU per
request (the process's, its SQLite thread's included), the SQL statements a post sends, by kind
(one INSERT a message would show as 1.0), and a pyinstrument call tree of the posts.
bench/profiles keeps the outputs from before and after the work on the wire path.
"""

from __future__ import annotations

import asyncio
import math
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
from pyinstrument import Profiler
from sqlalchemy import event
from sqlalchemy.engine import Engine

from bench.wire import BENCH_KEY, OPERATIONS, serving
from ranch.config import parse_config
from ranch.hub.app import Settings, create_app

BODY = orjson.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"role": "ROLE_USER", "messageId": "m-1", "parts": [{"text": "hello"}]}},
    }
)
SCOPE: dict[str, Any] = {
    "type": "http",
    "asgi": {"version": "3.0"},
    "http_version": "1.1",
    "method": "POST",
    "scheme": "http",
    "path": "/a2a/agents/echo",
    "raw_path": b"/a2a/agents/echo",
    "query_string": b"",
    "root_path": "",
    "headers": [
        (b"host", b"127.0.0.1"),
        (b"content-type", b"application/json"),
        (b"a2a-version", b"1.0"),
        (b"content-length", str(len(BODY)).encode()),
    ],
    "client": ("127.0.0.1", 1),
    "server": ("127.0.0.1", 80),
}


async def request(app: Any, headers: list[tuple[bytes, bytes]] | None = None) -> list[dict[str, Any]]:
    """One POST through the whole ASGI stack, with `headers` added; returns what the app sent."""
    scope = dict(SCOPE)
    if headers:
        scope["headers"] = [*SCOPE["headers"], *headers]
    return await asgi(app, scope, BODY)


async def asgi(app: Any, scope: dict[str, Any], body: bytes) -> list[dict[str, Any]]:
    """`body` sent to `app` in `scope`; the messages it answered with."""
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


async def started(app: Any) -> None:
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    await inbox.put({"type": "lifespan.startup"})

    async def receive() -> dict[str, Any]:
        return await inbox.get()

    async def send(message: dict[str, Any]) -> None:
        await outbox.put(message)

    asyncio.get_running_loop().create_task(
        app({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send)
    )
    assert (await outbox.get())["type"] == "lifespan.startup.complete"


async def main(count: int, keys: bool = False) -> None:
    """`keys`: the server runs `--auth keys` and every call presents the admin's key."""
    database = tempfile.mktemp(suffix=".db", prefix="ranch-profile-")
    settings = Settings(f"sqlite+aiosqlite:///{database}", caller_rate=None, agent_rate=None)
    if keys:
        settings = replace(settings, auth="keys", admin_key=BENCH_KEY)
    app = create_app(parse_config("agents:\n  - {id: echo, kind: echo}\n"), settings)
    headers = [(b"x-api-key", BENCH_KEY.encode())] if keys else []
    await started(app)
    reply = await request(app, headers)
    assert b'"hello"' in reply[-1]["body"], reply
    for _ in range(300):
        await request(app, headers)
    begin = time.perf_counter()
    for _ in range(count):
        await request(app, headers)
    per_request = (time.perf_counter() - begin) / count * 1e6
    profiler = Profiler(interval=0.0001)
    profiler.start()
    for _ in range(count):
        await request(app, headers)
    profiler.stop()
    what = "with `--auth keys` and a key" if keys else "without auth"
    print(f"SendMessage to an echo agent, in process, {what}: {per_request:.0f} µs per request\n")
    print(profiler.output_text(unicode=False, color=False, show_all=False))


# -- posts: a plain room post against a SendMessage, in process ---------------------------------------

POST_TEXT = {"text": "a plain post: it mentions no one and the room has no agent"}
POSTERS = 32
POST_ROOMS = 16


async def call(app: Any, method: str, path: str, body: object) -> list[dict[str, Any]]:
    """One request with the bench's key through the whole ASGI stack; what the app sent."""
    data = orjson.dumps(body)
    headers = [
        (b"host", b"127.0.0.1"),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
        (b"x-api-key", BENCH_KEY.encode()),
        (b"a2a-version", b"1.0"),
    ]
    scope = {**SCOPE, "method": method, "path": path, "raw_path": path.encode(), "headers": headers}
    return await asgi(app, scope, data)


def posts(rounds: int = 60, kind: str = "sqlite") -> str:
    """`_posts` on a fresh database of `kind` (bench.rooms': sqlite, postgres, postgres-1ms)."""
    from bench.rooms import LABELS, database

    with tempfile.TemporaryDirectory(prefix="ranch-profile-") as folder, database(kind, Path(folder)) as db:
        return asyncio.run(_posts(db.url, LABELS[kind], rounds))


async def _posts(url: str, label: str, rounds: int) -> str:
    """CPU per post and per SendMessage, 32 at once, `rounds` each per caller; statements a post
    sends; the posts' call tree."""
    settings = replace(Settings(url, caller_rate=None, agent_rate=None), auth="keys")
    app = create_app(
        parse_config("agents:\n  - {id: echo, kind: echo}\n"), replace(settings, admin_key=BENCH_KEY)
    )
    await started(app)
    rooms = []
    for n in range(POST_ROOMS):
        created = await call(app, "POST", "/api/v1/rooms", {"title": f"profile {n}"})
        rooms.append(orjson.loads(created[-1]["body"])["id"])
    send_body = orjson.loads(BODY)

    async def poster(n: int) -> None:
        for _ in range(rounds):
            answer = await call(app, "POST", f"/api/v1/rooms/{rooms[n % POST_ROOMS]}/messages", POST_TEXT)
            assert answer[0]["status"] == 201, answer

    async def sender(n: int) -> None:
        for _ in range(rounds):
            answer = await call(app, "POST", "/a2a/agents/echo", send_body)
            assert answer[0]["status"] == 200, answer

    async def cpu_per_request(work: Any) -> float:
        begin = time.process_time()
        await asyncio.gather(*(work(n) for n in range(POSTERS)))
        return (time.process_time() - begin) / (POSTERS * rounds) * 1e6

    await cpu_per_request(poster)  # warm-up
    await cpu_per_request(sender)
    statements: Counter[str] = Counter()

    def counted(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements[" ".join(statement.split()[:3])] += 1

    event.listen(Engine, "before_cursor_execute", counted)
    post_us = await cpu_per_request(poster)
    event.remove(Engine, "before_cursor_execute", counted)
    send_us = await cpu_per_request(sender)
    profiler = Profiler(interval=0.0001)
    profiler.start()
    await asyncio.gather(*(poster(n) for n in range(POSTERS)))
    profiler.stop()
    made = POSTERS * rounds
    lines = [
        f"{POSTERS} posts at once into {POST_ROOMS} rooms, in process, {label}, with a key: "
        f"{post_us:.0f} µs of CPU a post; {POSTERS} SendMessage calls at once: {send_us:.0f} µs; "
        f"{post_us / send_us:.2f}x",
        "",
        "SQL statements a post sends:",
        *(f"{count / made:7.3f}  {what}" for what, count in statements.most_common()),
        "",
        profiler.output_text(unicode=False, color=False, show_all=False),
    ]
    return "\n".join(lines)


# -- under load: py-spy on the ranch bench server while bench.load drives it -----------------------


def under_load(seconds: float = 6.0, concurrency: int = 32, kind: str = "ranch") -> str:
    """Where the server's time goes under load, by function: py-spy samples of a bench.wire server
    (`ranch`: `ranch serve` with its defaults; `ranch-keys`, `ranch-no-log`: the other rows).

    The in-process profile leaves out the HTTP server; this one shows all of it (uvicorn's socket
    writes included). Needs py-spy (a dev dependency) and permission to attach to a child process.
    """
    with tempfile.TemporaryDirectory(prefix="ranch-spy-") as folder:
        raw = Path(folder) / "profile.raw"
        with serving(kind) as server:
            py_spy = str(Path(sys.executable).with_name("py-spy"))  # the venv's, not whatever PATH holds
            spy = subprocess.Popen(
                [py_spy, "record", "-p", str(server.pid), "-d", str(math.ceil(seconds) + 1), "-r", "250"]
                + ["-f", "raw", "-o", str(raw)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            time.sleep(0.5)
            row = server.sample(OPERATIONS[0], concurrency, seconds)
            _, errors = spy.communicate(timeout=seconds + 30)
        if not raw.exists():
            raise SystemExit(f"py-spy recorded nothing: {errors.decode(errors='replace').strip()}")
        own, inclusive, total = _aggregate(raw.read_text())
    lines = [
        f"SendMessage to an echo agent under load (c={concurrency}, {row['rps']:,.0f} req/s with py-spy "
        f"attached, server CPU {row['cpu_us']:.0f} µs/request); {total} samples of the server's threads.",
        "",
        "Own time (the function itself):",
        *(f"{100 * n / total:5.1f}%  {name}" for name, n in own.most_common(20)),
        "",
        "Inclusive time (the function and what it calls):",
        *(f"{100 * n / total:5.1f}%  {name}" for name, n in inclusive.most_common(40)),
    ]
    return "\n".join(lines)


def instructions(kinds: list[str], requests: int = 3000, concurrency: int = 8) -> str:
    """Instructions each server runs per SendMessage, counted by callgrind: steadier than wall time
    or CPU time on a machine other work shares (kernel time, a socket write's, is not counted).

    Each server runs under `valgrind --tool=callgrind`; its counters are zeroed after a warm-up of
    a tenth as many calls and dumped after `requests` SendMessage calls at `concurrency`.
    """
    rows = []
    with tempfile.TemporaryDirectory(prefix="ranch-callgrind-") as folder:
        for kind in kinds:
            out = Path(folder) / f"{kind}.callgrind"
            wrap = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
            with serving(kind, Path(folder), wrap=wrap, timeout=300) as server:
                server.sample(OPERATIONS[0], concurrency, 30, cap=max(1, requests // 10))  # warm-up
                _control("-z", server.pid)
                row = server.sample(OPERATIONS[0], concurrency, 600, cap=requests)
                _control("-d", server.pid)
                counted = _total(sorted(Path(folder).glob(f"{out.name}.*"))[-1])
            rows.append((kind, counted / max(1.0, row["requests"]), int(row["errors"])))
    first = rows[0][1]
    lines = [f"SendMessage to an echo agent, c={concurrency}, {requests} requests counted per server:", ""]
    for kind, per, errors in rows:
        lines.append(f"{kind:14} {per:12,.0f} instructions/request  {per / first:5.2f}x  errors {errors}")
    return "\n".join(lines)


def _control(option: str, pid: int) -> None:
    subprocess.run(["callgrind_control", option, str(pid)], check=True, capture_output=True, timeout=120)


def _total(dump: Path) -> float:
    """The instructions a callgrind dump counted (its `summary:` or `totals:` line)."""
    for line in dump.read_text(errors="replace").splitlines():
        if line.startswith(("summary:", "totals:")):
            return float(line.split()[1])
    raise SystemExit(f"no totals in {dump}")


def _aggregate(raw: str) -> tuple[Counter[str], Counter[str], int]:
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [re.sub(r":\d+\)$", ")", frame) for frame in stack.split(";")]
        if any("_connection_worker_thread" in frame for frame in frames):
            continue  # aiosqlite's thread waiting on its queue: idle, whatever py-spy says
        total += int(count)
        own[frames[-1]] += int(count)
        for frame in set(frames):
            inclusive[frame] += int(count)
    return own, inclusive, max(total, 1)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--under-load"]:
        print(under_load(kind=sys.argv[2] if len(sys.argv) > 2 else "ranch"))
    elif sys.argv[1:2] == ["--posts"]:
        numbers = [arg for arg in sys.argv[2:] if arg.isdigit()]
        kinds = [arg for arg in sys.argv[2:] if not arg.isdigit()]
        print(posts(int(numbers[0]) if numbers else 60, kinds[0] if kinds else "sqlite"))
    elif sys.argv[1:2] == ["--instructions"]:
        print(instructions(sys.argv[2:] or ["bare", "ranch-no-log", "ranch", "ranch-keys"]))
    else:
        keyed = "--keys" in sys.argv[1:]
        numbers = [arg for arg in sys.argv[1:] if arg != "--keys"]
        asyncio.run(main(int(numbers[0]) if numbers else 3000, keys=keyed))
