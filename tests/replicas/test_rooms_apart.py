"""Rooms apart: each room keeps its own order, and rooms do not wait for each other.

Two hubs on one database and one Redis prefix stand for two replicas. People post into several
rooms on both at once; a watcher on each replica follows every room. Each room's events must reach
each watcher exactly as the room's log lists them (its own cursors, strictly increasing, none
missing, none twice), whatever the interleaving across rooms and replicas. And a room whose write
is held open (its row locked by another connection, as a replica mid-transaction holds it) does
not hold up a post into another room: on PostgreSQL, the only database here with concurrent
writers (SQLite has one writer at a time by design, so there is nothing to show there).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import asyncpg
import httpx

from _support.hubkit import ADMIN_KEY, Api, Live, RunningRanch, serve_ranch, wait_until
from _support.replicas import pair, room_log

CONFIG = """
agents:
  - id: scribe
    kind: rules
    rules:
      - {reply: "noted: {text}"}
"""
ONE_LOCK_FOR_ALL_ROOMS = 0x72616E6368
"""The advisory lock key room writes took before each room kept its own order (nothing takes it now)."""
ROOMS = 4
POSTS = 5
"""Messages each replica posts into each room."""


def replicas(database_url: str) -> tuple[Any, Any]:
    return pair(CONFIG, database_url)


def per_room(frames: list[dict[str, Any]]) -> dict[str, list[int]]:
    seen: dict[str, list[int]] = {}
    for frame in frames:
        if frame.get("cursor") is not None and "room_id" in frame:
            seen.setdefault(frame["room_id"], []).append(frame["cursor"])
    return seen


def test_posts_into_many_rooms_on_two_replicas_reach_every_watcher_in_each_rooms_order(
    database_url: str,
) -> None:
    first_server, second_server = replicas(database_url)
    with first_server as first, second_server as second:
        admin = Api(first.url, ADMIN_KEY)
        rooms = [str(admin.post("/rooms", {"title": f"room {n}"})["id"]) for n in range(ROOMS)]
        wait_until(
            lambda: all(
                Api(second.url, ADMIN_KEY).call("GET", f"/rooms/{r}").status_code == 200 for r in rooms
            ),
            what="the rooms on the other replica",
        )
        # one room has an agent: its replies and execution events interleave with the posts
        admin.post(f"/rooms/{rooms[0]}/participants", {"kind": "agent", "id": "scribe"})
        admin.call("PATCH", f"/rooms/{rooms[0]}", {"default_agent": "scribe"})
        watchers = {hub.url: Live(hub.url, ADMIN_KEY) for hub in (first, second)}
        for live in watchers.values():
            live.subscribe(rooms)

        def post_on(hub: RunningRanch, room: str, name: str) -> None:
            api = Api(hub.url, ADMIN_KEY)
            for n in range(POSTS):
                api.post(f"/rooms/{room}/messages", {"text": f"{name}-{n}"})

        posters = [
            threading.Thread(target=post_on, args=(hub, room, name))
            for room in rooms
            for hub, name in ((first, "a"), (second, "b"))
        ]
        for poster in posters:
            poster.start()
        for poster in posters:
            poster.join(timeout=60)
        wait_until(lambda: len(admin.messages(rooms[0])) == 4 * POSTS, what="every reply of the scribe")
        logs = {room: room_log(first, room) for room in rooms}
        assert all(log == sorted(set(log)) for log in logs.values())
        assert all(len(logs[room]) >= 2 * POSTS for room in rooms)

        for url, live in watchers.items():
            frames: list[dict[str, Any]] = []

            def caught_up(frame: dict[str, Any], frames: list[dict[str, Any]] = frames) -> bool:
                frames.append(frame)
                seen = per_room(frames)
                return all(seen.get(room, [0])[-1] == logs[room][-1] for room in rooms)

            live.until(caught_up, timeout=30)
            assert per_room(frames) == logs, f"the watcher on {url} saw another order than the rooms' logs"
            live.close()


@contextmanager
def row_held(database_url: str, room: str) -> Iterator[None]:
    """Lock the room's row from another connection, as a replica's open room write holds it, until
    the block ends."""
    held, release, failed = threading.Event(), threading.Event(), []

    async def hold() -> None:
        connection = await asyncpg.connect(database_url.replace("postgresql+asyncpg", "postgresql"))
        try:
            async with connection.transaction():
                await connection.execute("SELECT id FROM rooms WHERE id = $1 FOR NO KEY UPDATE", room)
                # and the one lock every room write of every replica took before rooms kept their own
                # order: with it, this test shows the whole cluster waiting on one room
                await connection.execute("SELECT pg_advisory_xact_lock($1)", ONE_LOCK_FOR_ALL_ROOMS)
                held.set()
                await asyncio.get_running_loop().run_in_executor(None, release.wait, 60)
        finally:
            await connection.close()

    def run() -> None:
        try:
            asyncio.run(hold())
        except Exception as exc:  # reported to the test below
            failed.append(exc)
            held.set()

    holder = threading.Thread(target=run)
    holder.start()
    try:
        assert held.wait(timeout=30) and not failed, failed
        yield
    finally:
        release.set()
        holder.join(timeout=30)


def lock_waiters(database_url: str) -> int:
    """Backends of this database waiting for a lock right now."""

    async def count() -> int:
        connection = await asyncpg.connect(database_url.replace("postgresql+asyncpg", "postgresql"))
        try:
            query = (
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            return int(await connection.fetchval(query))
        finally:
            await connection.close()

    return asyncio.run(count())


def test_a_room_whose_write_is_held_open_does_not_hold_up_a_post_into_another_room(postgres_url: str) -> None:
    with serve_ranch(CONFIG, postgres_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        busy, free = (str(admin.post("/rooms", {"title": title})["id"]) for title in ("busy", "free"))
        waited: list[httpx.Response] = []
        with row_held(postgres_url, busy):
            poster = threading.Thread(
                target=lambda: waited.append(admin.call("POST", f"/rooms/{busy}/messages", {"text": "waits"}))
            )
            poster.start()
            wait_until(
                lambda: lock_waiters(postgres_url) >= 1, what="the busy room's post waiting for its row"
            )
            # the other room is written meanwhile, and its watchers hear of it
            live = Live(hub.url, ADMIN_KEY)
            live.subscribe([free])
            admin.post(f"/rooms/{free}/messages", {"text": "goes through"})
            live.until(lambda f: f["type"] == "message.created" and f["data"]["text"] == "goes through")
            live.close()
            assert not waited, "the busy room's post ended while its row was held"
        poster.join(timeout=30)
        assert [response.status_code for response in waited] == [201]
        assert [m["text"] for m in admin.messages(busy)] == ["waits"]


def test_rooms_count_their_own_cursors_from_one(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        made = [str(admin.post("/rooms", {"title": f"r{n}"})["id"]) for n in range(2)]
        for room in made:
            admin.post(f"/rooms/{room}/messages", {"text": "one"})
        logs = [room_log(hub, room) for room in made]
        # each room's cursors start at 1 and have no holes, whatever the other room wrote
        assert all(log == list(range(1, len(log) + 1)) for log in logs)
