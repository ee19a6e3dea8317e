"""A database that cannot be used answers STORE_UNAVAILABLE (503, Retry-After) on REST and an error
frame on the WebSocket, never a bare 500; nothing is half-written, and the log keeps the error
without the statement's parameters (which hold what the caller wrote).

`ranch serve` runs as a child process, its SQLite file locked by another connection holding
`BEGIN EXCLUSIVE`, as another process could (docs/errors.md, STORE_UNAVAILABLE).
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from _support.hubkit import Api, Live
from _support.servers import ServerProcess, free_port

ADMIN_KEY = "rk_admin_store_0123456789abcdefgh"
SECRET = "the vault code is 4711-SECRET"
"""A message's text: it goes to the database as a statement parameter, and must not reach the log."""


def ranch_serve(tmp_path: Path) -> ServerProcess:
    """`ranch serve` on a SQLite file whose writers wait 1 s for a lock; its output kept."""
    config = tmp_path / "hub.yaml"
    config.write_text("agents:\n  - {id: echo, kind: echo}\n")
    port = free_port()
    command = [sys.executable, "-m", "ranch", "serve", str(config), "--port", str(port)]
    command += ["--db", f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}", "--sqlite-busy-timeout", "1"]
    command += ["--caller-rate", "off"]
    env = {**os.environ, "RANCH_ADMIN_KEY": ADMIN_KEY}
    return ServerProcess(command, port, env=env, log_path=tmp_path / "serve.log", name="ranch")


@contextmanager
def locked(database: Path) -> Iterator[None]:
    """Hold the SQLite file's write lock from another connection."""
    connection = sqlite3.connect(database, timeout=5, isolation_level=None)
    try:
        connection.execute("BEGIN EXCLUSIVE")
        yield
        connection.execute("ROLLBACK")
    finally:
        connection.close()


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

        with locked(tmp_path / "hub.db"):
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
