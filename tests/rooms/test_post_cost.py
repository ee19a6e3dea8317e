"""What a plain post costs the database (issue 27): people post far more often than anything else
ranch writes, so a post that wakes no agent is one transaction of a handful of statements.

Counted on a served ranch as its code runs them (SQLAlchemy's `before_cursor_execute`), on SQLite
and PostgreSQL: a member's post into a room that has no agent, with a key the server already knows.
Before issue 27 it took 8 statements on SQLite and 9 on PostgreSQL, in two transactions (the key's
lookup, then the post's). The smallest of a few posts is taken: the server's own background work
(its heartbeat, the delivery sweep) only ever adds statements to a post's window.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

from _support.hubkit import ADMIN_KEY, Api, serve_ranch

CONFIG = "agents:\n  - {id: echo, kind: echo}\n"
POSTS = 5
STATEMENTS = 4
"""A plain post's statements: its room and sender in one read, the message, and the room's event
(the room's count of events, the event)."""
ROW_LOCK = 1
"""PostgreSQL also locks the room's row first (rooms/bus.py)."""


@dataclass
class Window:
    statements: list[str] = field(default_factory=list)
    commits: int = 0


@contextlib.contextmanager
def counted() -> Iterator[Window]:
    """The statements and commits every engine in this process runs while the block runs."""
    window = Window()

    def statement(_conn: Any, _cursor: Any, text: str, *_args: Any) -> None:
        window.statements.append(" ".join(text.split())[:80])

    def commit(_conn: Any) -> None:
        window.commits += 1

    event.listen(Engine, "before_cursor_execute", statement)
    event.listen(Engine, "commit", commit)
    try:
        yield window
    finally:
        event.remove(Engine, "before_cursor_execute", statement)
        event.remove(Engine, "commit", commit)


def test_a_plain_post_is_one_transaction_of_a_few_statements(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        mia = Api(hub.url, admin.post("/users", {"id": "mia", "name": "Mia"})["api_key"])
        room = admin.post("/rooms", {"title": "plain", "participants": [{"kind": "user", "id": "mia"}]})["id"]
        mia.post(f"/rooms/{room}/messages", {"text": "hello"})  # the server knows mia's key now
        windows = []
        for index in range(POSTS):
            with counted() as window:
                mia.post(f"/rooms/{room}/messages", {"text": f"a plain post, {index}"})
            windows.append(window)
        posted = mia.get(f"/rooms/{room}/messages")["items"]
    cheapest = min(windows, key=lambda window: len(window.statements))
    bound = STATEMENTS + (ROW_LOCK if database_url.startswith("postgresql") else 0)
    assert len(cheapest.statements) <= bound, cheapest.statements
    assert cheapest.commits == 1, cheapest.statements
    assert not [text for text in cheapest.statements if "api_keys" in text], cheapest.statements
    assert [item["text"] for item in posted][-POSTS:] == [f"a plain post, {index}" for index in range(POSTS)]
