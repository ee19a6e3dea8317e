"""`ranch.client.Hub` against a real hub on 127.0.0.1 (SQLite and PostgreSQL), through the public
package only: typed answers, typed errors (checked before sending where the server's model
refuses), `Retry-After` honoured, and a live event stream that resumes after a dropped connection
without yielding an event twice."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from _support.hubkit import ADMIN_KEY, serve_ranch
from ranch.client import (
    Conflict,
    Hub,
    InvalidInput,
    NotFound,
    RateLimited,
    Unauthenticated,
    UnsupportedContent,
    models,
)

CONFIG = """
agents:
  - id: echo
    kind: echo
    skills: [{id: echoing, name: Echoing, tags: [mirror]}]
  - {id: greeter, kind: rules, rules: [{reply: "Hello: {text}"}]}
"""
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


async def until(check: Any, what: str) -> Any:
    with anyio.fail_after(15):
        while True:
            found = await check()
            if found:
                return found
            await anyio.sleep(0.05)


def test_a_script_uses_rooms_messages_files_and_executions(database_url: str, tmp_path: Path) -> None:
    picture = tmp_path / "dot.png"
    picture.write_bytes(PIXEL)
    with serve_ranch(CONFIG, database_url) as server:

        async def scenario() -> None:
            async with Hub(server.url, ADMIN_KEY) as hub:
                me = await hub.me()
                assert (me.kind, me.id) == ("user", "admin")
                assert [agent.id for agent in await hub.agents(tag="mirror")] == ["echo"]
                room = await hub.create_room("Files", participants=[{"kind": "agent", "id": "echo"}])
                assert [p.id for p in await hub.participants(room.id)] == ["admin", "echo"]
                posted = await hub.post(room.id, "@echo look", files=[picture], metadata={"n": 1})
                link = f"/api/v1/rooms/{room.id}/messages/{posted.id}/parts/1"  # part 0: its text
                assert posted.text == "@echo look" and posted.parts[0] == {
                    "url": link,
                    "filename": "dot.png",
                    "mediaType": "image/png",
                    "size": len(PIXEL),
                }
                assert await hub.part_bytes(room.id, posted.id, 1) == PIXEL
                assert await hub.file_bytes(posted.parts[0]) == PIXEL
                with pytest.raises(NotFound) as no_bytes:
                    await hub.part_bytes(room.id, posted.id, 0)
                assert no_bytes.value.field == "index"
                with pytest.raises(InvalidInput) as elsewhere:  # never sends the key to another host
                    await hub.file_bytes({"url": "https://files.example/api/v1/x"})
                assert elsewhere.value.field == "url"
                assert (posted.sender.kind, posted.sender.id, posted.metadata) == ("user", "admin", {"n": 1})

                async def echoed() -> Any:
                    return next((m for m in await hub.messages(room.id) if m.sender.id == "echo"), None)

                reply = await until(echoed, "echo's reply")
                assert reply.parts[0]["filename"] == "dot.png" and reply.cursor > posted.cursor
                (execution,) = await hub.executions(room.id)
                assert execution.agent_id == "echo" and (await hub.execution(execution.id)).turns >= 1
                done = await hub.complete(execution.id, "thanks")
                assert (done.status, done.reason) == ("completed", "thanks")
                assert [m.id for m in await hub.history(room.id, before=reply.cursor, limit=5)] == [posted.id]
                assert room.id in [r.id for r in await hub.rooms()]

        anyio.run(scenario)


def test_errors_are_typed_and_a_bad_value_is_named_before_anything_is_sent(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url) as server:

        async def scenario() -> None:
            sent: list[httpx.Request] = []

            async def count(request: httpx.Request) -> None:
                sent.append(request)

            http = httpx.AsyncClient(event_hooks={"request": [count]})
            async with http, Hub(server.url, ADMIN_KEY, http=http) as hub:
                greeter = [{"kind": "agent", "id": "greeter"}]
                room = await hub.create_room("Errors", id="errors", participants=greeter)
                with pytest.raises(NotFound) as missing:
                    await hub.room("nowhere")
                assert missing.value.status == 404 and missing.value.code == "NOT_FOUND"
                with pytest.raises(Conflict) as taken:
                    await hub.create_room("Again", id="errors")
                assert taken.value.field == "id"
                before = len(sent)
                with pytest.raises(InvalidInput) as bad:
                    await hub.post(room.id, "hi", parts=[{"text": "a", "url": "https://x.example/"}])
                assert bad.value.field == "parts[0]" and bad.value.status == 400
                assert len(sent) == before  # refused by the hub's own model, before any request
                with pytest.raises(UnsupportedContent) as refused:
                    await hub.post(room.id, "@greeter see", parts=[{"data": {"a": 1}}])
                assert refused.value.status == 415 and refused.value.field == "parts[0]"
                assert await hub.messages(room.id) == []
            async with Hub(server.url, "rk_not_a_key") as stranger:
                with pytest.raises(Unauthenticated):
                    await stranger.me()

        anyio.run(scenario)


def test_an_external_agent_hands_its_work_off_and_is_told_the_result(tmp_path: Path) -> None:
    """`hand_off`: the execution waits on the child the other agent runs; the handing agent's next
    delivery is the child's answer. A refusal names the field, checked first by the hub's own model."""
    with serve_ranch(CONFIG, tmp_path / "hub.db") as server:

        async def scenario() -> None:
            async with Hub(server.url, ADMIN_KEY) as admin:
                scout = await admin.register_agent({"id": "scout", "kind": "external"})
                assert isinstance(scout, models.RegisteredExternal)  # its key, shown once
                agents = [{"kind": "agent", "id": "scout"}, {"kind": "agent", "id": "greeter"}]
                room = await admin.create_room("Outage", participants=agents)
                await admin.post(room.id, "@scout look into the outage")
                async with Hub(server.url, scout.api_key) as agent:
                    first = await until(agent.next_delivery, "scout's delivery")
                    (execution,) = [e for e in await admin.executions(room.id) if e.agent_id == "scout"]
                    with pytest.raises(InvalidInput) as itself:
                        await agent.hand_off(execution.id, "scout", "mine")
                    assert itself.value.field == "agent"
                    with pytest.raises(InvalidInput) as blank:  # the hub's model, before sending
                        await agent.hand_off(execution.id, "")
                    assert blank.value.field == "agent"
                    waiting = await agent.hand_off(execution.id, "greeter", "greetings", message="say hi")
                    assert waiting.status == "handoff"
                    assert (
                        waiting.handoff_to is not None
                        and waiting.reason == "handed off to greeter: greetings"
                    )
                    await agent.ack(first.delivery_id)
                    told = await until(agent.next_delivery, "the child's result")
                    assert told.message.text == "Hello: say hi"
                    child = await admin.execution(waiting.handoff_to)
                    assert child.parent_execution_id == execution.id and child.agent_id == "greeter"

        anyio.run(scenario)


def test_retry_after_is_honoured_on_429(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url, caller_rate=0.5, caller_burst=1) as server:

        async def scenario() -> None:
            async with Hub(server.url, ADMIN_KEY, retries=0) as hasty:
                await hasty.me()
                with pytest.raises(RateLimited) as limited:
                    await hasty.me()
                assert limited.value.retry_after == 2 and limited.value.status == 429
            async with Hub(server.url, ADMIN_KEY, retries=1) as patient:
                began = time.monotonic()
                assert (await patient.me()).id == "admin"  # one retry, after the 2 s the hub asked for
                waited = time.monotonic() - began
                assert 1.0 <= waited < 4  # a backoff of its own would have tried after 0.2 s, and failed

        anyio.run(scenario)


@contextlib.asynccontextmanager
async def cuttable_proxy(port: int) -> AsyncIterator[tuple[str, Any, list[int]]]:
    """A TCP proxy on 127.0.0.1 to `port`; `cut()` drops every connection through it; the list
    counts the connections made."""
    links: list[asyncio.StreamWriter] = []
    made = [0]

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def link(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", port)
        made[0] += 1
        links.extend((client_writer, server_writer))
        await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer))

    def cut() -> None:
        for writer in links:
            writer.transport.abort()
        links.clear()

    proxy = await asyncio.start_server(link, "127.0.0.1", 0)
    async with proxy:
        yield f"http://127.0.0.1:{proxy.sockets[0].getsockname()[1]}", cut, made


def test_the_event_stream_resumes_after_a_dropped_connection_and_never_repeats(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url) as server:
        port = int(server.url.rsplit(":", 1)[1])

        async def scenario() -> None:
            async with Hub(server.url, ADMIN_KEY) as hub, cuttable_proxy(port) as (proxy_url, cut, made):
                room = await hub.create_room("Live")
                watcher = Hub(proxy_url, ADMIN_KEY)
                stream = watcher.events([room.id])
                seen: list[Any] = []
                texts = [f"message {n}" for n in range(6)]

                async def watch() -> None:
                    async for event in stream:
                        seen.append(event)
                        if sum(e.type == "message.created" for e in seen) == len(texts):
                            return

                async with anyio.create_task_group() as group:
                    group.start_soon(watch)
                    await stream.connected.wait()
                    for text in texts[:3]:
                        await hub.post(room.id, text)
                    await until(lambda: _created(seen, 3), "the first three events")
                    cut()  # the WebSocket drops; three more messages are posted meanwhile
                    for text in texts[3:]:
                        await hub.post(room.id, text)
                    with anyio.fail_after(15):
                        await _done(group, seen, len(texts))
                await stream.aclose()
                await watcher.aclose()
                created = [e.data["text"] for e in seen if e.type == "message.created"]
                assert created == texts  # every one, in order, none twice
                cursors = [e.cursor for e in seen]
                assert cursors == sorted(set(cursors))
                assert made[0] == 2  # it did reconnect, once

        anyio.run(scenario)


async def _created(seen: list[Any], count: int) -> bool:
    return bool(sum(e.type == "message.created" for e in seen) >= count)


async def _done(group: Any, seen: list[Any], count: int) -> None:
    while not await _created(seen, count):  # noqa: ASYNC110 - a count, not an event
        await anyio.sleep(0.05)


def test_the_public_names_are_listed_sorted_and_all_exist() -> None:
    import ranch.client

    assert ranch.client.__all__ == sorted(ranch.client.__all__)
    assert all(hasattr(ranch.client, name) for name in ranch.client.__all__)
    assert issubclass(ranch.client.UnsupportedContent, ranch.client.HubError)


def test_an_event_at_or_before_its_rooms_cursor_and_a_delivery_seen_are_not_yielded_again() -> None:
    """The stream's own rule, whatever the hub sends (a relay replaying, a delivery sent again)."""
    from ranch.client import EventStream

    stream = EventStream(Hub("http://127.0.0.1:9", ""), ["r"], cursor=5)
    event: dict[str, Any] = {"type": "message.created", "room_id": "r", "at": None, "data": {}}
    assert stream._event({**event, "cursor": 5}) is None
    assert stream._event({**event, "cursor": 6}) is not None
    assert stream._event({**event, "cursor": 6}) is None and stream.cursors == {"r": 6}
    other = {**event, "room_id": "s", "cursor": 1}  # another room counts its own events
    assert stream._event(other) is not None and stream._event(other) is None
    assert stream.cursors == {"r": 6, "s": 1}
    assert stream._event({"type": "message.delta", "room_id": "r", "cursor": None, "data": {}}) is not None
    message = {"id": "m", "cursor": 1, "room_id": "r", "type": "text", "sender": {"kind": "user", "id": "u"},
               "text": "hi", "mentions": [], "metadata": {}, "thread_id": None, "execution_id": None,
               "created_at": "2026-01-01T00:00:00Z", "parts": [{"text": "hi"}]}  # fmt: skip
    delivery = {"type": "delivery", "delivery_id": "d1", "room_id": "r", "message": message}
    assert stream._event(delivery) is not None and stream._event(delivery) is None
    stream.forget("d1")
    assert stream._event(delivery) is not None
