"""What one replica changes, every replica knows at once: a key revoked on the first is refused by
the second, an agent registered or removed on the first is served or gone on the second, and a
session is one session whichever replica a call reaches.

Two hubs on one database and one Redis prefix stand for two replicas behind a load balancer. The
second has just used the key, so without the message it would keep serving it from its cache for
5 s; the check below gives it three seconds. Redis (127.0.0.1:6379) and, for the PostgreSQL runs,
PostgreSQL are needed; without them these tests fail, saying so.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx

from _support.hubkit import ADMIN_KEY, Api, RunningRanch, serve_ranch

REDIS = "redis://127.0.0.1:6379/0"
CONFIG = """
agents:
  - {id: greeter, kind: echo}
"""
PROMPTLY = 3.0
"""Seconds a revocation may take to reach the other replica: under the caches' 5 s, with room for
a loaded machine."""
TTL = 3.0
"""The sessions' TTL in the session test, in seconds."""
ONCE_TOLD = 10.0
"""Seconds a new agent or room may take to be usable on the other replica (without the message,
never until a restart)."""


def send(hub: RunningRanch, agent_id: str, key: str) -> int:
    """SendMessage to `agent_id` with `key`: 200 when answered, else the refusal's HTTP status."""
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    answer = httpx.post(
        hub.agent_url(agent_id), json=body, headers={"A2A-Version": "1.0", "X-API-Key": key}, timeout=10
    )
    return answer.status_code if answer.status_code != 200 or "result" in answer.json() else 500


def within(seconds: float, check: Callable[[], bool]) -> float:
    """How long `check` took to hold, asked every 20 ms; fails past `seconds`."""
    began = time.monotonic()
    while not check():
        assert time.monotonic() - began < seconds, f"not within {seconds} s"
        time.sleep(0.02)
    return time.monotonic() - began


def replicas(database_url: str) -> tuple[Any, Any]:
    shared: dict[str, Any] = {
        "redis_url": REDIS,
        "redis_prefix": f"ranch-test-{uuid.uuid4().hex[:8]}",
        "auth": "keys",
    }
    return serve_ranch(CONFIG, database_url, **shared), serve_ranch(CONFIG, database_url, **shared)


def test_a_key_revoked_on_one_replica_is_refused_by_another_at_once(database_url: str) -> None:
    first_server, second_server = replicas(database_url)
    with first_server as first, second_server as second:
        owner = Api(
            first.url, Api(first.url, ADMIN_KEY).post("/organizations", {"id": "acme"})["owner"]["api_key"]
        )
        created = owner.post("/keys", {})
        key, key_id = created["api_key"], created["key"]["id"]
        assert send(second, "greeter", key) == 200  # the second replica now holds the key in its cache
        owner.post(f"/keys/{key_id}/revoke", None, status=200)
        within(PROMPTLY, lambda: send(second, "greeter", key) == 401)
        assert send(first, "greeter", key) == 401


def test_keys_made_with_a_revoked_key_and_a_removed_agents_keys_are_refused_by_another_at_once(
    database_url: str,
) -> None:
    first_server, second_server = replicas(database_url)
    with first_server as first, second_server as second:
        owner_key = Api(first.url, ADMIN_KEY).post("/organizations", {"id": "acme"})["owner"]["api_key"]
        owner = Api(first.url, owner_key)
        parent = owner.post("/keys", {})
        child = Api(first.url, parent["api_key"]).post("/keys", {})["api_key"]
        agent_key = owner.post("/agents", {"id": "ext", "kind": "external"})["api_key"]
        for key in (child, agent_key):  # the second replica now holds both in its cache
            assert send(second, "greeter", key) == 200
        owner.post(f"/keys/{parent['key']['id']}/revoke", None, status=200)
        assert owner.call("DELETE", "/agents/acme.ext").status_code == 204
        within(PROMPTLY, lambda: send(second, "greeter", child) == send(second, "greeter", agent_key) == 401)
        assert send(first, "greeter", child) == send(first, "greeter", agent_key) == 401


def test_an_agent_registered_or_removed_on_one_replica_is_served_or_gone_on_another(
    database_url: str,
) -> None:
    first_server, second_server = replicas(database_url)
    with first_server as first, second_server as second:
        owner_key = Api(first.url, ADMIN_KEY).post("/organizations", {"id": "acme"})["owner"]["api_key"]
        owner = Api(first.url, owner_key)
        agent_id = owner.post("/agents", {"id": "parrot", "kind": "echo"})["agent"]["id"]
        assert agent_id == "acme.parrot"
        within(ONCE_TOLD, lambda: send(second, agent_id, owner_key) == 200)
        assert agent_id in {agent["id"] for agent in Api(second.url, owner_key).get("/agents")["items"]}
        assert owner.call("DELETE", f"/agents/{agent_id}").status_code == 204
        within(ONCE_TOLD, lambda: send(second, agent_id, owner_key) == 404)
        assert send(first, agent_id, owner_key) == 404


def test_a_session_left_idle_on_one_replica_has_expired_on_another(database_url: str) -> None:
    """Sessions live in Redis with `--redis-url`: the second replica knows the first one's session,
    refreshes it, and answers SessionExpired once it has been idle past the TTL (real seconds: the
    shared store times sessions on the wall clock every replica shares). Calls 1 s apart against a
    TTL of 3 s: a call may take up to 2 s on a busy host before the test could be wrong."""
    shared: dict[str, Any] = {
        "redis_url": REDIS,
        "redis_prefix": f"ranch-test-{uuid.uuid4().hex[:8]}",
        "session_ttl": TTL,
    }
    with (
        serve_ranch(CONFIG, database_url, **shared) as first,
        serve_ranch(CONFIG, database_url, **shared) as second,
    ):

        def on(hub: RunningRanch) -> dict[str, Any]:
            message = {
                "messageId": uuid.uuid4().hex,
                "role": "ROLE_USER",
                "contextId": "c1",
                "parts": [{"text": "hi"}],
            }
            body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
            answer: dict[str, Any] = httpx.post(
                hub.agent_url("greeter"), json=body, headers={"A2A-Version": "1.0"}, timeout=10
            ).json()
            return answer

        began = time.monotonic()
        assert "result" in on(first)
        for hub in (second, first, second):  # each call 1 s after the last, the same session refreshed
            time.sleep(1.0)
            assert "result" in on(hub), f"{time.monotonic() - began:.1f} s since the first call"
        assert time.monotonic() - began > TTL  # it lived past its TTL only by being used on both
        time.sleep(TTL + 0.5)
        expired = on(first)
        assert expired.get("error", {}).get("code") == -32063, expired  # SessionExpired
        assert "result" in on(second)  # ended on every replica: the next call starts a new one


def test_a_room_created_on_one_replica_takes_a2a_messages_on_another_at_once(database_url: str) -> None:
    """The A2A gateway knows room ids without a query: the second replica learns the first one's new
    room from the fan-out, so a SendMessage whose contextId is that room posts into it there."""
    first_server, second_server = replicas(database_url)
    with first_server as first, second_server as second:
        admin = Api(first.url, ADMIN_KEY)
        room = admin.post("/rooms", {"title": "Ops", "participants": [{"kind": "agent", "id": "greeter"}]})[
            "id"
        ]

        def into_the_room() -> bool:
            message = {
                "messageId": uuid.uuid4().hex,
                "role": "ROLE_USER",
                "contextId": room,
                "parts": [{"text": "hi"}],
            }
            body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
            answer = httpx.post(
                second.agent_url("greeter"),
                json=body,
                headers={"A2A-Version": "1.0", "X-API-Key": ADMIN_KEY},
                timeout=10,
            ).json()
            task = answer.get("result", {}).get("task", {})  # a plain echo answers with a message
            return task.get("contextId") == room and "ranch.execution" in task.get("metadata", {})

        within(ONCE_TOLD, into_the_room)
        texts = [message["text"] for message in admin.messages(room)]
        assert texts[:2] == ["hi", "hi"], texts  # the echo's reply, posted in the room
