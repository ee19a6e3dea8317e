"""REST and WebSocket callers share the A2A bindings' rate limits: 429 or an error frame, with Retry-After."""

from __future__ import annotations

from pathlib import Path

from _support.clock import Clock
from _support.hubkit import ADMIN_KEY, Api, Live, serve_ranch

CONFIG = """
agents:
  - {id: greeter, kind: echo}
"""


def test_rest_and_websocket_callers_are_rate_limited_with_retry_after(tmp_path: Path) -> None:
    database = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    clock = Clock()  # stands still: the fourth call finds the bucket empty, however slow the first three
    with serve_ranch(CONFIG, database, caller_rate=2.0, caller_burst=3, clock=clock) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        answers = [admin.call("GET", "/me") for _ in range(4)]
        assert [a.status_code for a in answers[:3]] == [200, 200, 200]
        refused = answers[3]
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "RATE_LIMITED"
        wait = int(refused.headers["Retry-After"])
        assert 1 <= wait <= 2
        clock.advance(wait)
        assert admin.call("GET", "/me").status_code == 200  # honouring Retry-After is enough

        live = Live(hub.url, ADMIN_KEY)
        replies = []
        for _ in range(5):
            live.send({"type": "ping"})
            replies.append(live.recv())
        kinds = [reply["type"] for reply in replies]
        assert "pong" in kinds and "error" in kinds
        limited = next(reply for reply in replies if reply["type"] == "error")
        assert limited["error"]["code"] == "RATE_LIMITED" and limited["error"]["retryAfter"] >= 1
        live.close()
