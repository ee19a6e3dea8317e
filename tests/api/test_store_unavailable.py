"""A database that cannot be used answers STORE_UNAVAILABLE (503, Retry-After) on REST and an error
frame on the WebSocket, never a bare 500; nothing is half-written, and the log keeps the error
without the statement's parameters (which hold what the caller wrote).

`ranch serve` runs as a child process, its SQLite file locked by another connection holding
`BEGIN EXCLUSIVE`, as another process could (docs/errors.md, STORE_UNAVAILABLE).
"""

from __future__ import annotations

from pathlib import Path

from _support.hubkit import Api, Live, sqlite_locked
from _support.servers import ServerProcess, ranch_serve_process

ADMIN_KEY = "rk_admin_store_0123456789abcdefgh"
SECRET = "the vault code is 4711-SECRET"
"""A message's text: it goes to the database as a statement parameter, and must not reach the log."""


def ranch_serve(tmp_path: Path) -> ServerProcess:
    """`ranch serve` on a SQLite file whose writers wait 1 s for a lock; its output kept."""
    config = "agents:\n  - {id: echo, kind: echo}\n"
    flags = ["--sqlite-busy-timeout", "1", "--caller-rate", "off"]
    return ranch_serve_process(tmp_path, config, *flags, admin_key=ADMIN_KEY)


def test_a_locked_database_answers_store_unavailable_on_rest_and_the_websocket(tmp_path: Path) -> None:
    with ranch_serve(tmp_path) as server:
        admin = Api(server.url, ADMIN_KEY)
        admin.post("/rooms", {"id": "ops", "title": "Ops"})
        scout = admin.post("/agents", {"id": "scout", "kind": "external", "description": "outside"})
        admin.post("/rooms/ops/participants", {"kind": "agent", "id": "scout"})
        admin.post("/rooms/ops/messages", {"text": "@scout look into it"})
        live = Live(server.url, scout["api_key"])
        delivery = live.recv()
        assert delivery["type"] == "delivery", delivery

        with sqlite_locked(tmp_path / "hub.db"):
            refused = admin.call("POST", "/rooms/ops/messages", {"text": SECRET})
            live.send({"type": "ack", "delivery_id": delivery["delivery_id"]})
            frame = live.recv()
            live.send({"type": "ping"})
            pong = live.recv()

        assert refused.status_code == 503, refused.text
        assert refused.headers["content-type"] == "application/json"
        assert int(refused.headers["Retry-After"]) >= 1
        error = refused.json()["error"]
        assert error["code"] == "STORE_UNAVAILABLE" and error["field"] is None, error
        assert "database is locked" in error["message"] and SECRET not in error["message"]
        assert frame["type"] == "error" and frame["error"]["code"] == "STORE_UNAVAILABLE", frame
        assert pong == {"type": "pong"}  # the connection is kept

        log = server.output()
        assert "database is locked" in log  # the error is logged ...
        assert "4711-SECRET" not in log  # ... without the statement's parameters

        # the lock is gone: the same post and ack go through, and the refused post left nothing
        posted = admin.post("/rooms/ops/messages", {"text": "after the lock"})
        live.send({"type": "ack", "delivery_id": delivery["delivery_id"]})
        assert live.recv() == {"type": "acked", "delivery_id": delivery["delivery_id"]}
        live.close()
        texts = [message["text"] for message in admin.messages("ops")]
        assert texts == ["@scout look into it", "after the lock"], texts
        assert posted["text"] == "after the lock"
        events = admin.get("/rooms/ops/events", limit=200)["items"]
        created = [event["data"]["text"] for event in events if event["type"] == "message.created"]
        assert created == texts  # no event of the refused post either
