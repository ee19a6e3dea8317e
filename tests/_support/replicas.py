"""Two hubs on one database and one Redis prefix: two replicas behind a load balancer, in tests."""

from __future__ import annotations

import uuid
from contextlib import AbstractContextManager

from _support.hubkit import ADMIN_KEY, Api, RunningRanch, serve_ranch

REDIS = "redis://127.0.0.1:6379/0"


def pair(
    config: str, database_url: str
) -> tuple[AbstractContextManager[RunningRanch], AbstractContextManager[RunningRanch]]:
    """Two replicas serving `config` on `database_url`, sharing a fresh Redis prefix."""
    shared = {"redis_url": REDIS, "redis_prefix": f"ranch-test-{uuid.uuid4().hex[:8]}"}
    return serve_ranch(config, database_url, **shared), serve_ranch(config, database_url, **shared)


def room_log(hub: RunningRanch, room: str) -> list[int]:
    """The cursors of the room's stored events, as REST pages them."""
    admin, since = Api(hub.url, ADMIN_KEY), 0
    cursors: list[int] = []
    while page := admin.get(f"/rooms/{room}/events", since=since, limit=200)["items"]:
        cursors += [event["cursor"] for event in page]
        since = cursors[-1]
    return cursors
