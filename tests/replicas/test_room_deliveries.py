"""Room messages belong to the replica that queued them: a replica starting next to it leaves them
alone, and when that replica dies (`kill -9`) another one handles what it had queued, once.

Two `ranch serve` processes on one database with `--lease 6`. The agent takes one message of a
room at a time, in order: a replica that took a live replica's queue at start would answer the
second message while the first is still running.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from _support import TESTS
from _support.hubkit import ADMIN_KEY, Api
from _support.servers import ServerProcess, free_port

CONFIG = """
agents:
  - id: worker
    kind: python
    entry: _support.probes:Probe
    options: {sleep: 60, sleep_on: "take your time", reply: "done: {text}"}
"""
LEASE = 6.0
"""Long enough that a live replica's heartbeat (every 2 s) never lapses on a loaded machine (with
`--lease 1`, a busy CI host once kept it silent for over a second, and its queue was taken); a
dead replica of this host is known gone at the next take-over round (every 3 s) all the same."""
TAKEN_OVER = 20.0
"""Seconds the live replica may take to handle a dead one's queue: a take-over round (3 s) with
room for a loaded machine."""
LEFT_ALONE = 3.5
"""Seconds the second replica is watched after its start: its take-over at start, and one round."""


def serve(config: Path, database_url: str, log: Path) -> ServerProcess:
    port = free_port()
    command = [sys.executable, "-m", "ranch", "serve", str(config), "--port", str(port)]
    command += ["--db", database_url, "--lease", str(LEASE)]
    env = {**os.environ, "PYTHONPATH": str(TESTS), "RANCH_ADMIN_KEY": ADMIN_KEY}
    return ServerProcess(command, port, env=env, log_path=log.with_suffix(f".{port}.log"))


def texts(api: Api, room: str) -> list[str]:
    return [str(message["text"]) for message in api.messages(room)]


def within(seconds: float, check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {seconds} s"
        time.sleep(0.05)


def test_a_dead_replicas_room_messages_are_handled_by_a_live_one_once(
    database_url: str, tmp_path: Path
) -> None:
    config = tmp_path / "rooms.yaml"
    config.write_text(CONFIG)
    with serve(config, database_url, tmp_path / "first") as first:
        on_first = Api(first.url, ADMIN_KEY)
        worker = {"kind": "agent", "id": "worker"}
        room = on_first.post("/rooms", {"title": "Queue", "participants": [worker]})
        room_id = str(room["id"])
        on_first.post(f"/rooms/{room_id}/messages", {"text": "@worker take your time"})
        within(10, lambda: on_first.execution_status(room_id, "worker") == "working", "the first turn")
        on_first.post(f"/rooms/{room_id}/messages", {"text": "@worker and then this"})

        with serve(config, database_url, tmp_path / "second") as second:
            on_second = Api(second.url, ADMIN_KEY)
            watched_until = time.monotonic() + LEFT_ALONE
            while time.monotonic() < watched_until:  # the first replica's queue stays the first's
                assert "done: and then this" not in texts(on_second, room_id)
                time.sleep(0.1)

            first.kill()
            within(
                TAKEN_OVER,
                lambda: "done: and then this" in texts(on_second, room_id),
                "the dead replica's queued message handled",
            )
            shown = texts(on_second, room_id)
            assert shown.count("done: and then this") == 1
            assert "done: take your time" not in shown  # that turn died with its replica
            executions = on_second.get(f"/rooms/{room_id}/executions")["items"]
            # the turn that died with its replica, and the one that answered the queued message
            assert sorted(row["status"] for row in executions) == ["failed", "ready"]
