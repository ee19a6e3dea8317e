"""What replicas read from Redis is what replicas wrote: a frame someone else publishes on the room
topic never reaches a watcher, while what a replica says does (docs/deploy.md, `--cluster-secret`).

One hub with a Redis URL and a cluster secret; the forger publishes with redis-py straight onto the
topic, as anyone who can reach Redis could. Redis (127.0.0.1:6379) is needed: without it these tests
fail, saying so.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import orjson
import pytest
from redis.asyncio import Redis

from _support.hubkit import ADMIN_KEY, Api, Live, serve_ranch

REDIS = "redis://127.0.0.1:6379/0"
SECRET = "s3cret-shared-by-every-replica"
CONFIG = """
agents:
  - id: scribe
    kind: rules
    rules:
      - {reply: "noted: {text}"}
"""


def publish(channel: str, data: bytes) -> int:
    """Publish as an outsider would: a plain client, no secret; how many subscribers got it."""

    async def send() -> int:
        async with Redis.from_url(REDIS) as outsider:
            return int(await outsider.publish(channel, data))

    try:
        return asyncio.run(send())
    except OSError as exc:
        pytest.fail(f"this test needs Redis at 127.0.0.1:6379: {exc}")


def forged(room: str, text: str, type: str = "message.created", kind: str = "live") -> bytes:
    data = {"id": f"forged-{uuid.uuid4().hex[:6]}", "sender": {"kind": "user", "id": "admin"}, "text": text}
    payload = {"type": type, "room_id": room, "cursor": None, "data": data}
    return orjson.dumps({"kind": kind, "origin": "elsewhere", "payload": payload})


def texts(frames: list[dict[str, Any]]) -> list[str]:
    return [str(frame.get("data", {}).get("text", "")) for frame in frames]


@pytest.mark.parametrize("secret", [SECRET, None], ids=["signed", "unsigned"])
def test_a_frame_published_straight_onto_the_topic_never_reaches_a_watcher(
    tmp_path: Any, secret: str | None
) -> None:
    prefix = f"ranch-test-{uuid.uuid4().hex[:8]}"
    channel = f"{prefix}:topic:rooms.events"
    signing = {"cluster_secret": secret} if secret else {}
    with serve_ranch(CONFIG, tmp_path / "hub.db", redis_url=REDIS, redis_prefix=prefix, **signing) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room = str(
            admin.post("/rooms", {"title": "Ops", "participants": [{"kind": "agent", "id": "scribe"}]})["id"]
        )
        watcher = Live(hub.url, ADMIN_KEY)
        watcher.subscribe([room])
        # what a forger can write: a stored-looking message, and (signed hubs only) even a kind that
        # does travel on the topic (a streamed delta), which only a replica's signature lets through
        attempts = [forged(room, "FORGED: reset your key at http://evil.example")]
        if secret is not None:
            attempts.append(forged(room, "FORGED delta", type="message.delta"))
        for attempt in attempts:
            assert publish(channel, attempt) >= 1  # the hub listens on that channel
        admin.post(f"/rooms/{room}/messages", {"text": "genuine"})
        frames = watcher.until(lambda f: f.get("data", {}).get("text") == "genuine")
        watcher.close()
    assert "genuine" in texts(frames)
    assert not [text for text in texts(frames) if "FORGED" in text]
