"""A WebSocket replay of a large room never holds up the other rooms, nor grows without bound.

A room holds 200 messages of 50 KB (10 MB of events, more than the kernel buffers one socket's
unread bytes with, so a reader that reads nothing provably leaves its replay in progress). While
WebSockets replay it from cursor 0 to readers that read nothing, a post to another room must be
answered (the replay reads outside the room-write lock, a bounded page at a time); a watcher whose
live frames pile up beyond its byte bound is closed with 1013, and the frames it got plus those a
reconnect with its last cursor gets are the room's log exactly once, in order. An agent's many
waiting deliveries come in bounded pages, all of them, in order.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from websockets.sync.client import connect

from _support.hubkit import ADMIN_KEY, Api, RunningRanch, serve_ranch
from _support.silent import Silent, kernel_buffers, read_all
from ranch.api.inbox import pending_pages
from ranch.rooms.pages import PAGE_BYTES, PAGE_ROWS
from ranch.rooms.watchers import WATCHER_BYTES

CONFIG = "agents: []\n"
BIG = 200
"""Messages in the big room."""
TEXT = 50_000
"""Characters of each message."""
READERS = 20
"""Sockets replaying the big room at once, reading nothing."""
FILLERS = 8
"""Posters filling the big room at once."""
POST_BOUND_S = 1.0
"""How long a post to another room may take meanwhile, at least (else 5 times a post with no replay
going on). Before the fix, each replay held every room write while it read its whole backlog:
20 of them held a post 3.1 s on SQLite and 1.2 s on PostgreSQL."""


def silent_socket(url: str, rooms: list[str], cursor: int = 0, *, wait: bool = True) -> Silent:
    """A WebSocket that sent `subscribe` and (if told to wait) read only `subscribed`."""
    connection = Silent(url)
    connection.send({"type": "subscribe", "rooms": rooms, "cursor": cursor})
    if wait:
        subscribed(connection)
    return connection


def subscribed(connection: Silent) -> None:
    frame = connection.recv()
    assert frame is not None and frame["type"] == "subscribed", frame


def room_log(api: Api, room: str) -> list[int]:
    cursors: list[int] = []
    while True:
        page = api.get(f"/rooms/{room}/events", since=cursors[-1] if cursors else 0, limit=200)["items"]
        if not page:
            return cursors
        cursors += [event["cursor"] for event in page]


def stored(frames: list[dict[str, Any]]) -> list[int]:
    return [f["cursor"] for f in frames if f.get("cursor") is not None]


@pytest.fixture
def big_room(database_url: str) -> Iterator[tuple[RunningRanch, str, str]]:
    with serve_ranch(CONFIG, database_url, caller_rate=None) as hub:
        api = Api(hub.url, ADMIN_KEY)
        big = api.post("/rooms", {"title": "big"})["id"]
        small = api.post("/rooms", {"title": "small"})["id"]
        with (
            httpx.Client(base_url=f"{hub.url}/api/v1", headers={"X-API-Key": ADMIN_KEY}, timeout=30) as c,
            ThreadPoolExecutor(FILLERS) as fillers,
        ):  # posts at once share the room's transactions: the room fills in a fraction of the time

            def post(n: int) -> int:
                return c.post(f"/rooms/{big}/messages", json={"text": f"{n} " + "x" * TEXT}).status_code

            assert set(fillers.map(post, range(BIG))) == {201}
        yield hub, big, small


def test_replays_to_readers_that_read_nothing_do_not_hold_up_posts_elsewhere_and_lose_nothing(
    big_room: tuple[RunningRanch, str, str],
) -> None:
    hub, big, small = big_room
    api = Api(hub.url, ADMIN_KEY)
    assert BIG * TEXT > kernel_buffers(), "the backlog must not fit in the socket buffers"
    with httpx.Client(timeout=30) as client:
        answer = client.post(
            f"{hub.url}/api/v1/rooms/{small}/messages", json={"text": "hi"}, headers={"X-API-Key": ADMIN_KEY}
        )
        quiet = answer.elapsed.total_seconds()
    readers = [silent_socket(hub.url, [big], wait=False) for _ in range(READERS)]
    try:
        subscribed(readers[0])  # the server took the first frame: the others are right behind it
        with httpx.Client(timeout=max(POST_BOUND_S, 5 * quiet)) as client:
            answer = client.post(
                f"{hub.url}/api/v1/rooms/{small}/messages",
                json={"text": "hello"},
                headers={"X-API-Key": ADMIN_KEY},
            )
        assert answer.status_code == 201, answer.text
        for reader in readers[1:]:  # every replay had started, and none can have finished: read nothing yet
            subscribed(reader)

        def post_more() -> None:  # live events while the replays are still going
            for n in range(10):
                api.post(f"/rooms/{big}/messages", {"text": f"live {n}"})

        poster = threading.Thread(target=post_more)
        poster.start()
        poster.join(timeout=60)
        log = room_log(api, big)
        for reader in readers:
            frames = read_all(reader, log[-1])
            assert stored(frames) == log, "a replay lost, repeated or reordered events"
    finally:
        for reader in readers:
            reader.close()


def test_a_watcher_that_falls_behind_during_its_replay_is_closed_1013_and_resumes_from_its_cursor(
    big_room: tuple[RunningRanch, str, str],
) -> None:
    hub, big, _small = big_room
    api = Api(hub.url, ADMIN_KEY)
    reader = silent_socket(hub.url, [big])
    try:
        # live frames pile up behind the stalled replay: past the byte bound (not the frame count)
        for n in range(WATCHER_BYTES // TEXT + 20):
            api.post(f"/rooms/{big}/messages", {"text": f"live {n} " + "y" * TEXT})
        log = room_log(api, big)
        frames = read_all(reader, log[-1])
        assert reader.close_code == 1013, f"not closed for falling behind (got {len(frames)} frames)"
        seen = stored(frames)
        assert seen == log[: len(seen)], "the frames before the close skipped or repeated events"
        assert len(seen) < len(log)
    finally:
        reader.close()
    again = silent_socket(hub.url, [big], cursor=seen[-1] if seen else 0)
    try:
        rest = stored(read_all(again, log[-1]))
    finally:
        again.close()
    assert seen + rest == log, "resuming from the last cursor missed or repeated events"


def test_an_agents_many_waiting_deliveries_come_in_bounded_pages_all_in_order(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url, caller_rate=None) as hub:
        api = Api(hub.url, ADMIN_KEY)
        key = api.post("/agents", {"id": "outside", "kind": "external"})["api_key"]
        members = [{"kind": "agent", "id": "outside"}]
        room = api.post("/rooms", {"title": "inbox", "participants": members})["id"]
        count = 150
        for n in range(count):
            api.post(f"/rooms/{room}/messages", {"text": f"@outside {n} " + "z" * TEXT})

        async def pages() -> list[list[Any]]:
            engine = create_async_engine(hub.database_url)
            try:
                return [page async for page in pending_pages(async_sessionmaker(engine), "outside")]
            finally:
                await engine.dispose()

        found = asyncio.run(pages())
        assert len(found) > 1
        for page in found:
            assert len(page) <= PAGE_ROWS
            assert len(page) == 1 or sum(len(d.message.text) for d in page) <= PAGE_BYTES
        texts = [d.message.text.split(" ")[1] for page in found for d in page]
        assert texts == [str(n) for n in range(count)]

        live = connect(hub.url.replace("http://", "ws://", 1) + f"/api/v1/ws?token={key}", max_size=None)
        try:
            got = [json.loads(live.recv(timeout=30)) for _ in range(count)]
        finally:
            live.close()
        assert [g["message"]["text"].split(" ")[1] for g in got] == [str(n) for n in range(count)]
