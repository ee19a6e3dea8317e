"""`python -m bench.profile`: where one SendMessage to an echo agent spends its time, in process.

Drives the ranch app through ASGI directly (no sockets, no HTTP parser), so the
profile shows only ranch and the libraries it calls. Prints µs per request and a
pyinstrument call tree. bench/README.md keeps the output from before and after
the lean wire path.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from typing import Any

import orjson
from pyinstrument import Profiler

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


async def request(app: Any) -> list[dict[str, Any]]:
    """One POST through the whole ASGI stack; returns what the app sent."""
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": BODY, "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(dict(SCOPE), receive, send)
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


async def main(count: int) -> None:
    database = tempfile.mktemp(suffix=".db", prefix="ranch-profile-")
    app = create_app(
        parse_config("agents:\n  - {id: echo, kind: echo}\n"),
        Settings(f"sqlite+aiosqlite:///{database}", caller_rate=None, agent_rate=None),
    )
    await started(app)
    reply = await request(app)
    assert b'"hello"' in reply[-1]["body"], reply
    for _ in range(300):
        await request(app)
    begin = time.perf_counter()
    for _ in range(count):
        await request(app)
    per_request = (time.perf_counter() - begin) / count * 1e6
    profiler = Profiler(interval=0.0001)
    profiler.start()
    for _ in range(count):
        await request(app)
    profiler.stop()
    print(f"SendMessage to an echo agent, in process: {per_request:.0f} µs per request\n")
    print(profiler.output_text(unicode=False, color=False, show_all=False))


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3000))
