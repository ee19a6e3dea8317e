"""`ranch watch` prints handoffs (issue 31): the agent handing its work over (`⇢`), the child's
status, and its result going back to the agent that waited (`⇠`), against a real hub."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from _support.hubkit import ADMIN_KEY, Api, serve_ranch, wait_until

CONFIG = """
agents:
  - id: lead
    kind: python
    entry: _support.handoffs:Handing
    options: {to: helper, reason: "needs a specialist", done: true}
  - id: helper
    kind: python
    entry: _support.probes:Probe
    options: {reply: "helper's answer"}
"""


def test_watch_prints_a_handoff_and_its_way_back(tmp_path: Path) -> None:
    with serve_ranch(CONFIG, tmp_path / "hub.db") as hub:
        admin = Api(hub.url, ADMIN_KEY)
        participants = [{"kind": "agent", "id": "lead"}, {"kind": "agent", "id": "helper"}]
        room = admin.post("/rooms", {"id": "desk", "title": "Desk", "participants": participants})["id"]
        env = {**os.environ, "RANCH_API_KEY": ADMIN_KEY, "RANCH_URL": hub.url, "PYTHONUNBUFFERED": "1"}
        out = tmp_path / "watch.out"
        with out.open("wb") as sink:
            watch = subprocess.Popen(
                [sys.executable, "-m", "ranch", "watch", room, "--last", "0"],
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_until(lambda: f"-- watching {room}" in out.read_text(), timeout=30, what="watch to start")
            admin.post(f"/rooms/{room}/messages", {"text": "@lead plan it"})
            wait_until(lambda: "· lead completed" in out.read_text(), timeout=30, what="the lead done")
        finally:
            watch.terminate()
            watch.wait(timeout=10)
    lines = [line.strip() for line in out.read_text().splitlines()]
    assert "⇢ lead handed off to helper: needs a specialist" in lines
    assert "⇠ helper completed: back to lead" in lines
    assert (
        lines.index("⇢ lead handed off to helper: needs a specialist")
        < lines.index("⇠ helper completed: back to lead")
        < lines.index("· lead completed")
    )
