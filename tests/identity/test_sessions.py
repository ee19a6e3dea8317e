"""Sessions per (caller, context): refreshed on use, SessionExpired after the TTL, then a new one."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from redis.asyncio import Redis

from _support.clock import Clock
from _support.hubkit import ADMIN_KEY, Api, serve_ranch
from ranch.exceptions import SessionExpired
from ranch.identity.sessions import RedisSessions, Sessions, SessionStore

CONFIG = """
agents:
  - id: greeter
    kind: rules
    rules: [{reply: "Hello from greeter: {text}"}]
"""
TTL = 0.5


REDIS = "redis://127.0.0.1:6379/0"


@pytest.fixture(params=["memory", "redis"])
async def stores(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Clock, SessionStore, SessionStore]]:
    """Two stores on one clock standing for two replicas: the same store twice in memory (one
    process), two clients of one Redis prefix (two replicas; Redis at 127.0.0.1:6379 is needed)."""
    clock = Clock(1_000_000.0)
    if request.param == "memory":
        store = Sessions(60, clock=clock)
        yield clock, store, store
        return
    prefix = f"ranch-test-{uuid.uuid4().hex[:8]}"
    first, second = (RedisSessions(Redis.from_url(REDIS), 60, prefix=prefix, clock=clock) for _ in range(2))
    try:
        yield clock, first, second
    finally:
        await first.aclose()
        await second.aclose()


@pytest.mark.anyio
async def test_a_session_is_refreshed_by_use_and_expires_after_the_ttl(
    stores: tuple[Clock, SessionStore, SessionStore],
) -> None:
    clock, here, there = stores
    start = clock.now
    assert await here.touch("user:ann", "ctx") is True
    clock.now = start + 59
    assert await there.touch("user:ann", "ctx") is False  # refreshed: 59 s later it lives on
    clock.now = start + 118
    assert await here.touch("user:ann", "ctx") is False
    assert await there.touch("user:bob", "ctx") is True  # one session per (caller, context)
    clock.now = start + 179
    with pytest.raises(SessionExpired, match="expired after 60 s without use; the next call"):
        await there.touch("user:ann", "ctx")
    assert await here.touch("user:ann", "ctx") is True  # a new session on the same context
    with pytest.raises(ValueError):
        Sessions(0)


def test_sessions_are_bounded() -> None:
    sessions = Sessions(60, max_sessions=2)
    for context in ("a", "b", "c"):
        anyio.run(sessions.touch, "me", context)
    assert len(sessions) == 2


def send(url: str, context_id: str, headers: dict[str, str], binding: str = "jsonrpc") -> httpx.Response:
    message: dict[str, Any] = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "contextId": context_id,
        "parts": [{"text": "hi"}],
    }
    if binding == "rest":
        return httpx.post(
            f"{url}/message:send", json={"message": message}, headers={"A2A-Version": "1.0", **headers}
        )
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    return httpx.post(url, json=body, headers={"A2A-Version": "1.0", **headers})


def test_an_expired_session_answers_session_expired_and_the_next_call_starts_anew(database_url: str) -> None:
    clock = Clock()
    with serve_ranch(CONFIG, database_url, auth="keys", session_ttl=TTL, clock=clock) as hub:
        url, key = hub.agent_url("greeter"), {"X-API-Key": ADMIN_KEY}
        assert "result" in send(url, "ctx-1", key).json()
        clock.advance(TTL / 2)
        assert "result" in send(url, "ctx-1", key).json()  # refreshed
        clock.advance(TTL / 2)
        assert "result" in send(url, "ctx-1", key).json()  # TTL passed since the first, not the last call
        clock.advance(TTL * 1.5)
        expired = send(url, "ctx-1", key).json()
        assert expired["error"]["code"] == -32063, expired
        assert "expired after 0.5 s" in expired["error"]["message"]
        assert "result" in send(url, "ctx-1", key).json()  # a new session

        assert send(url, "ctx-2", key, "rest").status_code == 200
        clock.advance(TTL * 1.5)
        rest = send(url, "ctx-2", key, "rest")
        assert rest.status_code == 401 and rest.json()["error"]["status"] == "UNAUTHENTICATED", rest.text
        assert send(url, "ctx-2", key, "rest").status_code == 200

        # room posts over REST: the room is the context
        admin = Api(hub.url, ADMIN_KEY)
        room = admin.post("/rooms", {"title": "Ops"})["id"]
        admin.post(f"/rooms/{room}/messages", {"text": "one"})
        clock.advance(TTL * 1.5)
        answer = admin.call("POST", f"/rooms/{room}/messages", {"text": "two"})
        assert answer.status_code == 401 and answer.json()["error"]["code"] == "SESSION_EXPIRED", answer.text
        assert answer.json()["error"]["field"] == "contextId"
        admin.post(f"/rooms/{room}/messages", {"text": "three"})
        assert [m["text"] for m in admin.messages(room)] == ["one", "three"]


@pytest.mark.anyio
async def test_redis_silent_means_one_warning_not_one_per_call(caplog: pytest.LogCaptureFixture) -> None:
    """Calls go ahead without a session check while Redis does not answer; the log says so once (and
    once a minute after), then once more when Redis answers again."""
    silent = RedisSessions(Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=1), 60)
    with caplog.at_level("WARNING", logger="ranch.identity.sessions"):
        assert [await silent.touch("user:mia", f"room-{n}") for n in range(5)] == [False] * 5
    await silent.aclose()
    warnings = [record.getMessage() for record in caplog.records if "not checked" in record.getMessage()]
    assert len(warnings) == 1 and "1 check(s) skipped" in warnings[0]
    live = RedisSessions(Redis.from_url(REDIS), 60, prefix=f"ranch-test-{uuid.uuid4().hex[:8]}")
    live._skipped = 5  # as if it had been silent: its next answer is told
    with caplog.at_level("WARNING", logger="ranch.identity.sessions"):
        await live.touch("user:mia", "room-1")
    await live.aclose()
    assert any("answers again" in record.getMessage() for record in caplog.records)
