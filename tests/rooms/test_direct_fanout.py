"""A room's events written straight to its idle watchers' sockets keep every WebSocket guarantee.

While a watcher's writer waits, the bus writes an event's frame, built once, to its socket itself
(api/wsframes.py). Many watchers of a room must still get every event in order, once, with its
cursor and the text `GET /rooms/{id}/events` lists, byte for byte the same for all of them; a
watcher subscribing from cursor 0 while posts go on gets its replay and then the live events,
nothing twice; a key revoked mid-stream ends its socket with the error frame and 4401, and nothing
after; a watcher that reads nothing is closed 1013 and resumes from its last cursor losing nothing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from _support.hubkit import ADMIN_KEY, Api, RunningRanch, events_of, serve_ranch, wait_until
from _support.silent import Silent, kernel_buffers, read_all
from ranch.api import wsframes
from ranch.rooms import watchers

CONFIG = "agents: []\n"
WATCHERS = 50
POSTS = 30
EARLIER = 5
"""Messages in the room before anyone watches it (every watcher replays them)."""
TEXT = 50_000
"""Characters of each message posted to fill a watcher that reads nothing."""
SLOW_BOUND = 256 * 1024
"""A watcher's byte bound while a watcher that reads nothing is filled (8 MiB would take minutes)."""


@pytest.fixture
def hub(database_url: str) -> Iterator[RunningRanch]:
    with serve_ranch(CONFIG, database_url, caller_rate=None, auth="keys") as served:
        yield served


def watching(hub: RunningRanch, key: str) -> ClientConnection:
    """A WebSocket whose client reads everything as it comes (nothing held up on its side), and
    asks for no compression: `ranch serve` negotiates none, the in-process test server would (and a
    compressed connection keeps the ASGI path)."""
    url = hub.url.replace("http://", "ws://", 1) + f"/api/v1/ws?token={key}"
    return connect(url, open_timeout=10, max_queue=None, max_size=None, compression=None)


def until_closed(connection: ClientConnection) -> tuple[list[dict[str, Any]], int | None]:
    """Every frame the server sends before it closes the socket, and the close code."""
    frames: list[dict[str, Any]] = []
    while True:
        try:
            frames.append(json.loads(connection.recv(timeout=10)))
        except ConnectionClosed as closed:
            return frames, closed.rcvd.code if closed.rcvd else None


def subscribe(connection: ClientConnection, room: str, cursor: int = 0) -> None:
    connection.send(json.dumps({"type": "subscribe", "rooms": {room: cursor}}))


def texts_until(connection: ClientConnection, last: str) -> list[str]:
    """Each frame's text as it came, up to the `message.created` of the message `last`."""
    got: list[str] = []
    while True:
        raw = connection.recv(timeout=30)
        assert isinstance(raw, str)
        got.append(raw)
        frame = json.loads(raw)
        if frame["type"] == "message.created" and frame["data"]["text"] == last:
            return got


def stored(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in frames if f.get("cursor") is not None]


def test_many_watchers_get_every_event_in_order_with_one_replaying_and_one_key_revoked_meanwhile(
    hub: RunningRanch,
) -> None:
    admin = Api(hub.url, ADMIN_KEY)
    owner_key = admin.post("/organizations", {"id": "acme"})["owner"]["api_key"]
    owner = Api(hub.url, owner_key)
    mia_key = owner.post("/users", {"id": "mia", "name": "mia"})["api_key"]
    mia_key_id = Api(hub.url, mia_key).get("/keys")["items"][0]["id"]
    room = owner.post(
        "/rooms", {"id": "hall", "title": "hall", "participants": [{"kind": "user", "id": "mia"}]}
    )["id"]
    for n in range(EARLIER):
        owner.post(f"/rooms/{room}/messages", {"text": f"earlier {n}"})
    earlier = len(events_of(owner, room))  # the messages, and the participants joining
    many = [watching(hub, owner_key) for _ in range(WATCHERS)]
    mia = watching(hub, mia_key)
    late: ClientConnection | None = None
    try:
        for connection in many:
            subscribe(connection, room)
        subscribe(mia, room)
        replays = [texts_until(connection, f"earlier {EARLIER - 1}") for connection in many]
        texts_until(mia, f"earlier {EARLIER - 1}")
        direct_before = wsframes.written
        posted = 0

        def post_all() -> None:
            nonlocal posted
            for n in range(POSTS):
                owner.post(f"/rooms/{room}/messages", {"text": f"live {n}"})
                posted += 1

        poster = threading.Thread(target=post_all)
        poster.start()
        try:
            wait_until(lambda: posted >= POSTS // 3, what="a third of the posts")
            late = watching(hub, owner_key)
            subscribe(late, room)  # its replay runs while the posts go on
            wait_until(lambda: posted >= 2 * POSTS // 3, what="two thirds of the posts")
            owner.post(f"/keys/{mia_key_id}/revoke", None, status=200)
        finally:
            poster.join(timeout=60)
        assert posted == POSTS
        last = f"live {POSTS - 1}"
        lives = [texts_until(connection, last) for connection in many]
        late_frames = [json.loads(raw) for raw in texts_until(late, last)]
        mia_frames, mia_code = until_closed(mia)
    finally:
        for connection in many:
            connection.close()
        if late is not None:
            late.close()
        mia.close()
    log = events_of(owner, room)
    assert len(log) == earlier + POSTS
    everyones = [replay + live for replay, live in zip(replays, lives, strict=True)]
    assert all(texts == everyones[0] for texts in everyones), "watchers of one event got different bytes"
    frames = [json.loads(raw) for raw in everyones[0]]
    assert frames[0]["type"] == "subscribed"
    assert stored(frames) == log, "a watcher lost, repeated or reordered events"
    assert stored(late_frames) == log, "the watcher that replayed meanwhile lost or repeated events"
    assert mia_code == 4401
    assert mia_frames and mia_frames[-1]["type"] == "error"
    assert mia_frames[-1]["error"]["code"] == "UNAUTHENTICATED"
    seen_by_mia = stored(mia_frames)
    assert seen_by_mia == log[earlier : earlier + len(seen_by_mia)], "mia's events skipped or repeated"
    assert len(seen_by_mia) < POSTS, "events reached a socket whose key was revoked"
    # the live events reached the many watchers, waiting for them, by the direct path
    assert wsframes.written - direct_before >= WATCHERS * POSTS


def unread(hub: RunningRanch, room: str, cursor: int) -> Silent:
    """A watcher of `room` from `cursor` that reads only when told to (`_support.silent`)."""
    connection = Silent(hub.url)
    connection.send({"type": "subscribe", "rooms": {room: cursor}})
    subscribed = connection.recv()
    assert subscribed is not None and subscribed["type"] == "subscribed", subscribed
    return connection


def cursors_until(connection: Silent, last: int) -> list[int]:
    """Cursors of the frames up to the one with `last`, or until the server closes."""
    return [frame["cursor"] for frame in read_all(connection, last) if frame.get("cursor") is not None]


def test_a_watcher_reading_nothing_is_closed_1013_and_resumes_while_the_others_get_everything(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watchers, "WATCHER_BYTES", SLOW_BOUND)
    with serve_ranch(CONFIG, database_url, caller_rate=None) as hub:
        api = Api(hub.url, ADMIN_KEY)
        room = api.post("/rooms", {"title": "busy"})["id"]
        fast = [watching(hub, ADMIN_KEY) for _ in range(3)]
        slow = unread(hub, room, 0)
        try:
            for connection in fast:
                subscribe(connection, room)
                assert json.loads(connection.recv(timeout=10))["type"] == "subscribed"
            direct_before = wsframes.written
            # more than the kernel, the transport's high-water mark and the bound hold for it
            posts = (kernel_buffers() + 64 * 1024 + SLOW_BOUND) // TEXT + 20
            for n in range(posts):
                api.post(f"/rooms/{room}/messages", {"text": f"{n} " + "y" * TEXT})
            log = [event["cursor"] for event in events_of(api, room)]
            for connection in fast:
                got = [json.loads(raw) for raw in texts_until(connection, f"{posts - 1} " + "y" * TEXT)]
                assert [f["cursor"] for f in stored(got)] == log
            seen = cursors_until(slow, log[-1])
            assert slow.close_code == 1013, f"not closed for falling behind (got {len(seen)} frames)"
            assert seen == log[: len(seen)] and len(seen) < len(log)
        finally:
            for connection in fast:
                connection.close()
            slow.close()
        again = unread(hub, room, seen[-1] if seen else 0)
        try:
            rest = cursors_until(again, log[-1])
        finally:
            again.close()
    assert seen + rest == log, "resuming from the last cursor missed or repeated events"
    assert wsframes.written > direct_before, "nothing went by the direct path"
