"""A replica keeps hearing the others' catalog changes when its listener falls behind or the
fan-out fails for a moment: it reloads from the database and listens again, and never takes the
server down with it. (Across two real replicas and Redis: tests/replicas/test_catalog_across_replicas.py.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import orjson
import pytest

from ranch.catalog.changes import TOPIC, Changes
from ranch.fanout import Listening, hearing
from ranch.identity.security import build_security

pytestmark = pytest.mark.anyio


class FlakyFanout:
    """A shared fan-out whose first listener is closed after one message (it fell behind), whose
    second cannot subscribe (Redis restarting), and whose third stays open with one more message."""

    shared = True

    def __init__(self) -> None:
        self.listens = 0
        self.third_open = anyio.Event()

    async def publish(self, topic: str, data: bytes) -> None:
        raise AssertionError("nothing is published here")

    @asynccontextmanager
    async def listen(self, topic: str) -> AsyncIterator[Listening]:
        assert topic == TOPIC
        self.listens += 1
        if self.listens == 2:
            raise ConnectionError("Redis is restarting")
        send, receive = anyio.create_memory_object_stream[bytes](10)
        await send.send(
            orjson.dumps({"agent": f"a{self.listens}", "room": f"r{self.listens}", "org": "acme"})
        )
        if self.listens == 1:
            send.close()  # what a listener that fell too far behind sees
        else:
            self.third_open.set()
        with send, receive:
            yield receive


async def test_a_listener_that_falls_behind_or_fails_reloads_and_listens_again(monkeypatch: Any) -> None:
    monkeypatch.setattr(hearing, "LISTEN_AGAIN", 0.01)
    security = build_security("keys", set(), lambda: None, session_ttl=None)  # type: ignore[arg-type,return-value]
    changes = Changes(security)
    fanout = FlakyFanout()
    reloads: list[int] = []
    rooms: dict[str, str] = {}
    third = anyio.Event()

    async def resync() -> None:
        reloads.append(fanout.listens)
        if len(reloads) == 3:
            third.set()

    async with anyio.create_task_group() as group:
        await group.start(changes.follow, fanout, resync, rooms.__setitem__)
        with anyio.fail_after(5):
            await fanout.third_open.wait()
            await third.wait()
        group.cancel_scope.cancel()
    # listener 1: its message; listener 2 failed; listener 3 listens first, then reloads what was
    # missed since listener 1 ended (nothing published in between is lost), then its message
    assert reloads == [1, 3, 3]
    assert fanout.listens == 3
    assert rooms == {"r1": "acme", "r3": "acme"}  # the rooms the other replicas said they made
