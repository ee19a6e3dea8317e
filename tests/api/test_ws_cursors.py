"""The WebSocket with a cursor per room: each room's events after its own cursor, in order, once.

Each room counts its own events, so a client keeps one cursor per room and subscribes with them
(`{"type": "subscribe", "rooms": {"demo": 41, "ops": 0}}`); a reconnect with them misses nothing
in any room. The older form (a list of rooms and one `cursor`) still works, says it is deprecated,
and is exact for one room. Every watcher of a room is sent the same text: the event as
`GET /rooms/{id}/events` lists it.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import anyio
import pytest
from websockets.sync.client import connect

from _support.hubkit import ADMIN_KEY, Api, Live, events_of, serve_ranch
from _support.tcpproxy import TcpProxy
from ranch import deprecation
from ranch.client import EventView, Hub
from ranch.deprecation import RanchDeprecationWarning

CONFIG = "agents: []\n"


def newest(api: Api, room: str) -> int:
    items = api.get(f"/rooms/{room}/events", before=2**63 - 1, limit=1)["items"]
    return int(items[-1]["cursor"]) if items else 0


def post(api: Api, room: str, text: str) -> None:
    api.post(f"/rooms/{room}/messages", {"text": text})


def by_room(frames: list[dict[str, Any]], room: str) -> list[dict[str, Any]]:
    return [f for f in frames if f.get("room_id") == room and f.get("cursor") is not None]


def test_two_rooms_each_from_its_own_cursor_get_exactly_their_events_after_it_in_order_once(
    database_url: str,
) -> None:
    with serve_ranch(CONFIG, database_url, caller_rate=None) as hub:
        api = Api(hub.url, ADMIN_KEY)
        ahead, behind = (
            api.post("/rooms", {"title": "ahead"})["id"],
            api.post("/rooms", {"title": "behind"})["id"],
        )
        for n in range(6):  # `ahead` counts well past `behind`: one number cannot serve both
            post(api, ahead, f"ahead {n}")
        post(api, behind, "behind 0")
        assert events_of(api, ahead)[0]["cursor"] == events_of(api, behind)[0]["cursor"] == 1
        start = {ahead: events_of(api, ahead)[3]["cursor"], behind: 0}
        upto = {ahead: newest(api, ahead), behind: newest(api, behind)}
        live = Live(hub.url, ADMIN_KEY)
        try:
            subscribed = live.subscribe_from(start)
            assert subscribed == {
                "type": "subscribed",
                "rooms": start,
                "upto": upto,
                "replayed": len(events_of(api, ahead, start[ahead])) + len(events_of(api, behind)),
            }
            for n in range(3):  # live ones, interleaved, while the replay may still be going
                post(api, behind, f"behind {n + 1}")
                post(api, ahead, f"ahead {n + 6}")
            post(api, ahead, "last")
            post(api, behind, "last")
            done: set[str] = set()

            def both_done(frame: dict[str, Any]) -> bool:
                if frame.get("type") == "message.created" and frame["data"]["text"] == "last":
                    done.add(frame["room_id"])
                return done == {ahead, behind}

            frames = live.until(both_done)
            live.send({"type": "ping"})  # nothing else was on its way: the next frame answers the ping
            assert live.recv()["type"] == "pong"
        finally:
            live.close()
        assert by_room(frames, ahead) == events_of(api, ahead, start[ahead])
        assert by_room(frames, behind) == events_of(api, behind, start[behind])


def test_a_client_resumes_each_room_from_its_own_cursor_after_a_forced_close(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url, caller_rate=None) as hub, TcpProxy(hub.server.port) as proxy:
        api = Api(hub.url, ADMIN_KEY)
        ahead, behind = (
            api.post("/rooms", {"title": "ahead"})["id"],
            api.post("/rooms", {"title": "behind"})["id"],
        )
        for n in range(8):
            post(api, ahead, f"ahead {n}")
        start = {ahead: newest(api, ahead), behind: 0}  # `ahead` from now on, `behind` from its start

        async def scenario() -> tuple[list[EventView], dict[str, int]]:
            seen: list[EventView] = []
            async with (
                Hub(hub.url, ADMIN_KEY) as poster,
                Hub(f"http://127.0.0.1:{proxy.port}", ADMIN_KEY) as watcher,
            ):
                stream = watcher.events(start)

                async def wait_for(text: str) -> None:
                    with anyio.fail_after(20):
                        while not any(e.type == "message.created" and e.data["text"] == text for e in seen):  # noqa: ASYNC110
                            await anyio.sleep(0.02)

                async def read() -> None:
                    async for event in stream:
                        assert isinstance(event, EventView)
                        seen.append(event)

                async with anyio.create_task_group() as group:
                    group.start_soon(read)
                    await stream.connected.wait()
                    await poster.post(ahead, "before the cut")
                    await poster.post(behind, "before the cut, behind")
                    await wait_for("before the cut, behind")
                    await anyio.to_thread.run_sync(proxy.cut)  # the connection is reset; posts go on
                    for n in range(3):
                        await poster.post(behind, f"while cut {n}")  # cursors far below `ahead`'s
                        await poster.post(ahead, f"while cut, ahead {n}")
                    await anyio.to_thread.run_sync(proxy.restore)
                    await poster.post(ahead, "after")
                    await poster.post(behind, "after, behind")
                    await wait_for("after")
                    await wait_for("after, behind")
                    await stream.aclose()
                    group.cancel_scope.cancel()
            return seen, stream.cursors

        seen, cursors = anyio.run(scenario)
        assert proxy.cuts == 1
        assert cursors == {ahead: newest(api, ahead), behind: newest(api, behind)}
        for room in (ahead, behind):
            got = [e.model_dump(mode="json") for e in seen if e.room_id == room]
            assert got == events_of(api, room, start[room]), f"room {room} lost, repeated or reordered events"


def test_an_old_single_cursor_client_still_works_and_is_told_it_is_deprecated(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url, caller_rate=None) as hub:
        api = Api(hub.url, ADMIN_KEY)
        room = api.post("/rooms", {"title": "old"})["id"]
        for n in range(4):
            post(api, room, f"old {n}")
        cursor = events_of(api, room)[1]["cursor"]
        live = Live(hub.url, ADMIN_KEY)
        deprecation.reset()
        try:
            with pytest.warns(RanchDeprecationWarning, match="removed in ranch 0.2.0"):  # in the server's log
                subscribed = live.subscribe([room], cursor=cursor)
            assert subscribed["rooms"] == [room] and subscribed["cursor"] == cursor
            assert subscribed["upto"] == {room: newest(api, room)}
            assert subscribed["replayed"] == len(events_of(api, room, cursor))
            note = subscribed["deprecation"]
            assert "deprecated" in note and "0.2.0" in note and '"rooms": {"<room id>": <cursor>}' in note
            post(api, room, "last")
            frames = live.until(lambda f: f.get("type") == "message.created" and f["data"]["text"] == "last")
        finally:
            live.close()
        assert by_room(frames, room) == events_of(api, room, cursor)
        with warnings.catch_warnings():  # the server warned once for this process; the note stays
            warnings.simplefilter("error")
            again = Live(hub.url, ADMIN_KEY)
            try:
                assert "deprecation" in again.subscribe([room])
            finally:
                again.close()


BAD_SUBSCRIBES = [
    ({"rooms": {"ROOM": -1}}, "rooms.ROOM"),
    ({"rooms": {"ROOM": "5"}}, "rooms.ROOM"),
    ({"rooms": {"ROOM": 2**63}}, "rooms.ROOM"),
    ({"rooms": {"ROOM": True}}, "rooms.ROOM"),
    ({"rooms": {"ROOM": 1.5}}, "rooms.ROOM"),
    ({"rooms": {}}, "rooms"),
    ({"rooms": "ROOM"}, "rooms"),
    ({"rooms": {"ROOM": 1}, "cursor": 1}, "cursor"),
    ({"rooms": {f"r{n}": 0 for n in range(101)}}, "rooms"),  # at most 100 rooms per connection
    ({"rooms": {"nowhere": 0}}, "room_id"),
    ({"rooms": ["ROOM"], "cursor": -1}, "cursor"),
]
"""A `subscribe` (its fields after `type`; ROOM: a room that exists) and the field its error names."""


def test_a_bad_subscribe_is_refused_naming_its_field_and_the_socket_stays(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url, caller_rate=None) as hub:
        api = Api(hub.url, ADMIN_KEY)
        room = api.post("/rooms", {"title": "r"})["id"]
        live = Live(hub.url, ADMIN_KEY)
        try:
            for frame, field in BAD_SUBSCRIBES:
                live.send({"type": "subscribe", **json.loads(json.dumps(frame).replace("ROOM", room))})
                error = live.recv()
                assert error["type"] == "error", (frame, error)
                assert error["error"]["field"] == field.replace("ROOM", room), (frame, error)
            assert live.subscribe_from({room: 0})["rooms"] == {room: 0}  # still open, still usable
        finally:
            live.close()


def test_every_watcher_of_a_room_is_sent_the_same_text_the_events_json(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url, caller_rate=None) as hub:
        api = Api(hub.url, ADMIN_KEY)
        room = api.post("/rooms", {"title": "many"})["id"]
        url = hub.url.replace("http://", "ws://", 1) + f"/api/v1/ws?token={ADMIN_KEY}"
        sockets = [connect(url, open_timeout=10) for _ in range(3)]
        try:
            for sock in sockets:
                sock.send(json.dumps({"type": "subscribe", "rooms": {room: newest(api, room)}}))
                assert json.loads(sock.recv(timeout=10))["type"] == "subscribed"
            post(api, room, 'to everyone: ü, 😀, "quoted"')
            texts = [str(sock.recv(timeout=10)) for sock in sockets]
        finally:
            for sock in sockets:
                sock.close()
        assert texts[0] == texts[1] == texts[2]
        assert json.loads(texts[0]) == events_of(api, room)[-1]


def test_a_backlog_longer_than_what_is_counted_is_announced_from_the_cursors(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`replayed` costs the same whatever the backlog: each room's events are counted up to a bound
    (`rooms.bus.COUNTED`), and a longer backlog is announced from its cursors (a room counts its
    events one by one); short and long backlogs both match what the replay then sends."""
    monkeypatch.setattr("ranch.rooms.bus.COUNTED", 3)
    with serve_ranch(CONFIG, database_url, caller_rate=None) as hub:
        api = Api(hub.url, ADMIN_KEY)
        long, short = (api.post("/rooms", {"title": title})["id"] for title in ("long", "short"))
        for n in range(6):
            post(api, long, f"long {n}")
        post(api, short, "short 0")
        start = {long: events_of(api, long)[0]["cursor"], short: 0}
        live = Live(hub.url, ADMIN_KEY)
        try:
            subscribed = live.subscribe_from(start)
            longer, shorter = events_of(api, long, start[long]), events_of(api, short)
            assert len(longer) == 6 > 3 > len(shorter)  # past the bound, and within it
            backlog = longer + shorter
            assert subscribed["replayed"] == len(backlog)
            frames = [live.recv() for _ in backlog]
        finally:
            live.close()
        assert [f["cursor"] for f in frames] == [e["cursor"] for e in backlog]
