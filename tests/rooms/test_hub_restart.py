"""A hub killed mid-conversation (SIGKILL) and restarted, on SQLite and on PostgreSQL.

Every acknowledged message and every execution state survives; the execution that was
working is failed with a reason, and the message still queued behind it is delivered
after the restart.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import sys
from pathlib import Path

from _support import TESTS
from _support.hubkit import ADMIN_KEY, Api, wait_until
from _support.servers import ServerProcess, free_port

CONFIG = """
agents:
  - id: greeter
    kind: rules
    rules: [{reply: "Hello from greeter: {text}"}]
  - id: slow
    kind: python
    entry: _support.probes:Probe
    options: {sleep: 60, reply: "finally"}
"""


LEASE = "4"
"""Seconds (`--lease`) before the killed server's work is taken over on PostgreSQL: with the default
(10 s) and a take-over round every half lease, the wait after a fast restart could run out first."""


def serve(config: Path, database: str, port: int, log: Path) -> ServerProcess:
    command = [sys.executable, "-m", "ranch", "serve", str(config), "--port", str(port), "--db", database]
    command += ["--lease", LEASE]
    env = {**os.environ, "PYTHONPATH": str(TESTS), "RANCH_ADMIN_KEY": ADMIN_KEY}
    return ServerProcess(command, port, env=env, log_path=log, name="hub")


def test_sigkill_mid_conversation_loses_nothing(database_url: str, tmp_path: Path) -> None:
    config = tmp_path / "hub.yaml"
    config.write_text(CONFIG)
    port = free_port()
    with serve(config, database_url, port, tmp_path / "first.log") as server:
        admin = Api(server.url, ADMIN_KEY)
        room = admin.post(
            "/rooms",
            {
                "title": "Night shift",
                "participants": [{"kind": "agent", "id": "greeter"}, {"kind": "agent", "id": "slow"}],
            },
        )["id"]
        admin.post(f"/rooms/{room}/messages", {"text": "@greeter evening"})
        wait_until(lambda: len(admin.messages(room)) == 2, what="the greeter's reply")
        admin.post(f"/rooms/{room}/messages", {"text": "@slow take your time"})
        wait_until(
            lambda: admin.executions(room).get("slow", {}).get("status") == "working", what="slow working"
        )
        queued = admin.post(f"/rooms/{room}/messages", {"text": "@slow and then this"})
        before = admin.messages(room)
        server.kill()

    with serve(config, database_url, port, tmp_path / "second.log") as server:
        admin = Api(server.url, ADMIN_KEY)
        after = admin.messages(room)
        assert [m["id"] for m in after[: len(before)]] == [m["id"] for m in before]
        assert [m["text"] for m in before] == [
            "@greeter evening",
            "Hello from greeter: evening",
            "@slow take your time",
            "@slow and then this",
        ]
        failed = wait_until(  # at start, or once the stopped process's lease has run out
            lambda: [
                row
                for row in admin.get(f"/rooms/{room}/executions")["items"]
                if row["agent_id"] == "slow" and row["status"] == "failed"
            ],
            what="the interrupted execution failed",
        )
        assert len(failed) == 1 and "stopped before it finished" in failed[0]["reason"]
        assert admin.executions(room)["greeter"]["status"] == "ready"
        # the message queued behind the interrupted one is handled after the restart
        resumed = wait_until(
            lambda: [
                row
                for row in admin.get(f"/rooms/{room}/executions")["items"]
                if row["agent_id"] == "slow" and row["status"] == "working"
            ],
            what="the queued message resumed",
        )
        assert resumed[0]["id"] != failed[0]["id"]
        task = admin.get(f"/executions/{failed[0]['id']}/task")
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        assert "stopped before it finished" in task["status"]["message"]["parts"][0]["text"]
        assert queued["text"] in [
            m["parts"][0]["text"] for m in admin.get(f"/executions/{resumed[0]['id']}/task")["history"]
        ]


def test_a_turn_that_ended_as_its_server_died_is_told_to_its_room_at_the_restart(tmp_path: Path) -> None:
    """The crash between a turn's task being stored and its room being told (the reply, the
    execution's status), made by hand: the reply removed, the execution working again, its delivery
    running under a replica that is gone. The restarted server tells the room once."""
    config = tmp_path / "hub.yaml"
    config.write_text(CONFIG)
    database = tmp_path / "hub.db"
    url, port = f"sqlite+aiosqlite:///{database}", free_port()
    with serve(config, url, port, tmp_path / "first.log") as server:
        admin = Api(server.url, ADMIN_KEY)
        room = admin.post("/rooms", {"title": "Late", "participants": [{"kind": "agent", "id": "greeter"}]})[
            "id"
        ]
        admin.post(f"/rooms/{room}/messages", {"text": "@greeter evening"})
        wait_until(lambda: admin.execution_status(room, "greeter") == "ready", what="the greeter's turn")
        replies = [m for m in admin.messages(room) if m["sender"]["id"] == "greeter"]
        assert [m["text"] for m in replies] == ["Hello from greeter: evening"]
    with contextlib.closing(sqlite3.connect(database)) as db, db:
        db.execute("DELETE FROM messages WHERE room_id = ? AND sender_id = 'greeter'", (room,))
        db.execute(
            "UPDATE executions SET status = 'working' WHERE room_id = ? AND agent_id = 'greeter'", (room,)
        )
        db.execute("UPDATE deliveries SET status = 'running', runner = 'gone' WHERE room_id = ?", (room,))
    with serve(config, url, port, tmp_path / "second.log") as server:
        admin = Api(server.url, ADMIN_KEY)
        wait_until(lambda: admin.execution_status(room, "greeter") == "ready", what="the room told at start")
        replies = [m for m in admin.messages(room) if m["sender"]["id"] == "greeter"]
    assert [m["text"] for m in replies] == ["Hello from greeter: evening"]
