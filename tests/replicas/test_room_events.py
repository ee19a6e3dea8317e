"""Room events across replicas: a WebSocket on one replica sees every event of a room written on any
replica, in cursor order, once; a client that reconnects to another replica with its cursor misses
nothing.

Two hubs on one database and one Redis prefix stand for two replicas behind a load balancer.
People post on both at once, so the two replicas' writes interleave; each replica's watcher must
then see exactly the room's event log (as `GET /rooms/{id}/events` lists it), cursors strictly
increasing. Redis (127.0.0.1:6379) and, for the PostgreSQL runs, PostgreSQL are needed; without
them these tests fail, saying so.
"""

from __future__ import annotations

import threading
from typing import Any

from _support.hubkit import ADMIN_KEY, Api, Live, RunningRanch, wait_until
from _support.replicas import pair, room_log

CONFIG = """
agents:
  - id: scribe
    kind: rules
    rules:
      - {reply: "noted: {text}"}
  - id: reader
    kind: python
    entry: _support.probes:Probe
    options: {chunks: ["Reading ", "the ", "papers"], chunk_pause: 0.2}
"""
POSTS = 8
"""Messages each replica takes in the interleaved run (each wakes the scribe: about 6 events)."""


def replicas(database_url: str) -> tuple[Any, Any]:
    return pair(CONFIG, database_url)


def room_on_both(first: RunningRanch, second: RunningRanch, agent: str, *, default: bool = True) -> str:
    """A room made on the first replica with `agent` in it (its default agent unless told not),
    once the second knows it."""
    body: dict[str, Any] = {"title": "Ops", "participants": [{"kind": "agent", "id": agent}]}
    if default:
        body["default_agent"] = agent
    room = str(Api(first.url, ADMIN_KEY).post("/rooms", body)["id"])
    on_second = Api(second.url, ADMIN_KEY)
    wait_until(
        lambda: on_second.call("GET", f"/rooms/{room}").status_code == 200, what="the room on the other"
    )
    return room


def stored(frames: list[dict[str, Any]]) -> list[int]:
    return [frame["cursor"] for frame in frames if frame.get("cursor") is not None]


def replies(frames: list[dict[str, Any]]) -> list[str]:
    return [
        f["data"]["text"]
        for f in frames
        if f["type"] == "message.created" and f["data"].get("sender", {}).get("id") == "scribe"
    ]


def test_a_watcher_on_each_replica_sees_the_room_written_on_both_in_order(database_url: str) -> None:
    first_server, second_server = replicas(database_url)
    with first_server as first, second_server as second:
        room = room_on_both(first, second, "scribe")
        watchers = {hub.url: Live(hub.url, ADMIN_KEY) for hub in (first, second)}
        for live in watchers.values():
            live.subscribe([room])

        def post_on(hub: RunningRanch, name: str) -> None:
            api = Api(hub.url, ADMIN_KEY)
            for n in range(POSTS):
                api.post(f"/rooms/{room}/messages", {"text": f"{name}-{n}"})

        posters = [
            threading.Thread(target=post_on, args=(hub, name)) for hub, name in ((first, "a"), (second, "b"))
        ]
        for poster in posters:
            poster.start()
        for poster in posters:
            poster.join(timeout=60)
        expected = {f"noted: {name}-{n}" for name in "ab" for n in range(POSTS)}
        wait_until(lambda: len(Api(first.url, ADMIN_KEY).messages(room)) == 4 * POSTS, what="every reply")
        log = room_log(first, room)
        # one message of the room at a time, in order, whichever replica took it
        spoken = Api(first.url, ADMIN_KEY).messages(room)
        asked = [m["text"] for m in spoken if m["sender"]["id"] == "admin"]
        assert [m["text"] for m in spoken if m["sender"]["id"] == "scribe"] == [f"noted: {t}" for t in asked]

        for url, live in watchers.items():
            frames = live.until(lambda f: f.get("cursor") == log[-1], timeout=20)
            assert stored(frames) == log, f"the watcher on {url} saw another sequence than the log"
            assert sorted(replies(frames)) == sorted(expected)
            live.close()


def test_a_client_reconnecting_to_another_replica_with_its_cursor_misses_nothing(database_url: str) -> None:
    first_server, second_server = replicas(database_url)
    with first_server as first, second_server as second:
        admin = Api(first.url, ADMIN_KEY)
        room = room_on_both(first, second, "scribe")

        on_second = Live(second.url, ADMIN_KEY)
        on_second.subscribe([room])
        admin.post(f"/rooms/{room}/messages", {"text": "before"})
        seen = on_second.until(lambda f: replies([f]) == ["noted: before"])
        on_second.close()
        cursor = stored(seen)[-1]

        Api(second.url, ADMIN_KEY).post(f"/rooms/{room}/messages", {"text": "while away"})
        wait_until(lambda: len(admin.messages(room)) == 4, what="the reply while away")
        admin.post(f"/rooms/{room}/messages", {"text": "after"})

        on_first = Live(first.url, ADMIN_KEY)
        on_first.subscribe([room], cursor=cursor)
        resumed = on_first.until(lambda f: replies([f]) == ["noted: after"])
        on_first.close()
        log = [c for c in room_log(first, room) if cursor < c <= stored(resumed)[-1]]
    assert stored(resumed) == log
    assert replies(resumed) == ["noted: while away", "noted: after"]


def test_an_external_agent_connected_to_one_replica_gets_what_is_posted_on_another(database_url: str) -> None:
    first_server, second_server = replicas(database_url)
    with first_server as first, second_server as second:
        admin = Api(first.url, ADMIN_KEY)
        scout = admin.post("/agents", {"id": "scout", "kind": "external", "description": "its own model"})
        room = room_on_both(first, second, "scout", default=False)
        agent_on_second = Live(second.url, scout["api_key"])
        try:
            admin.post(f"/rooms/{room}/messages", {"text": "@scout look into the outage"})
            pushed = agent_on_second.until(lambda f: f["type"] == "delivery", timeout=10)[-1]
        finally:
            agent_on_second.close()
    assert pushed["room_id"] == room and pushed["message"]["text"] == "@scout look into the outage"


def test_streamed_text_reaches_a_watcher_on_another_replica_before_the_message(database_url: str) -> None:
    first_server, second_server = replicas(database_url)
    with first_server as first, second_server as second:
        admin = Api(first.url, ADMIN_KEY)
        room = room_on_both(first, second, "reader")
        on_second = Live(second.url, ADMIN_KEY)
        on_second.subscribe([room])
        admin.post(f"/rooms/{room}/messages", {"text": "read"})
        frames = on_second.until(
            lambda f: f["type"] == "message.created" and f["data"]["sender"]["id"] == "reader"
        )
        on_second.close()
    deltas = [f["data"]["text"] for f in frames if f["type"] == "message.delta"]
    assert "".join(deltas) == frames[-1]["data"]["text"] == "Reading the papers"
