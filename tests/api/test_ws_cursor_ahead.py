"""A `subscribe` from a cursor past a room's newest event is refused, naming that newest cursor
(issue 40): no event would ever follow it, and a client left waiting in silence never learns why."""

from __future__ import annotations

from pathlib import Path

from _support.hubkit import ADMIN_KEY, Api, Live, events_of, serve_ranch


def test_a_cursor_past_the_newest_event_is_answered_with_the_newest_cursor(tmp_path: Path) -> None:
    with serve_ranch("agents: []\n", tmp_path / "t.db") as served:
        api = Api(served.url, ADMIN_KEY)
        api.post("/rooms", {"id": "quiet", "title": "Quiet"})
        api.post("/rooms/quiet/messages", {"text": "one"})
        newest = events_of(api, "quiet")[-1]["cursor"]
        live = Live(served.url, ADMIN_KEY)
        try:
            live.send({"type": "subscribe", "rooms": {"quiet": newest + 500}})
            refused = live.recv()
            assert refused["type"] == "error", refused
            assert refused["room"] == "quiet" and refused["newest_cursor"] == newest
            assert refused["error"]["field"] == "rooms.quiet"
            assert refused["error"]["code"] == "INVALID_PARAMS"
            assert f"past its newest event ({newest})" in refused["error"]["message"]
            # the connection stays open; from the newest cursor, the next event comes live
            assert live.subscribe_from({"quiet": newest})["upto"] == {"quiet": newest}
            api.post("/rooms/quiet/messages", {"text": "two"})
            frames = live.until(lambda frame: frame.get("type") == "message.created")
            assert frames[-1]["data"]["text"] == "two"
        finally:
            live.close()
