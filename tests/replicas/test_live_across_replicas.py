"""A revocation or a removal on one replica ends what another replica keeps open, at once.

Two hubs on one database and one Redis prefix stand for two replicas behind a load balancer: a
WebSocket held by the second, which sends nothing, is ended by a key revoked on the first, and a
participant removed on the first stops getting the room's events on the second. Redis
(127.0.0.1:6379) and, for the PostgreSQL runs, PostgreSQL are needed; without them these tests
fail, saying so.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import redis

from _support.hubkit import ADMIN_KEY, Api, Live, RunningRanch, serve_ranch, wait_until
from _support.tcpproxy import TcpProxy

REDIS_PORT = 6379
REDIS = f"redis://127.0.0.1:{REDIS_PORT}/0"
CONFIG = """
agents:
  - {id: greeter, kind: echo}
"""
PROMPTLY = 5.0
"""Seconds within which the other replica must end the connection (the goal is 1 s; the margin is
for a loaded machine)."""
RECONNECTED = 30.0
"""Seconds a replica's fan-out may take to notice a cut, or to reconnect after it (backing off)."""


@contextmanager
def replicas(database_url: str) -> Iterator[tuple[RunningRanch, RunningRanch]]:
    shared: dict[str, Any] = {
        "redis_url": REDIS,
        "redis_prefix": f"ranch-test-{uuid.uuid4().hex[:8]}",
        "auth": "keys",
    }
    with (
        serve_ranch(CONFIG, database_url, **shared) as first,
        serve_ranch(CONFIG, database_url, **shared) as second,
    ):
        yield first, second


@contextmanager
def second_behind_a_proxy(database_url: str) -> Iterator[tuple[TcpProxy, RunningRanch, RunningRanch]]:
    """Two replicas, the second reaching Redis through a proxy the test can cut."""
    try:
        redis.Redis(port=REDIS_PORT, socket_timeout=2).ping()
    except redis.RedisError as exc:
        pytest.fail(f"this test needs Redis at 127.0.0.1:{REDIS_PORT}: {exc}")
    prefix = f"ranch-test-{uuid.uuid4().hex[:8]}"
    through = {"redis_prefix": prefix, "auth": "keys"}
    with (
        TcpProxy(REDIS_PORT) as proxy,
        serve_ranch(CONFIG, database_url, redis_url=REDIS, **through) as first,
        serve_ranch(CONFIG, database_url, redis_url=f"redis://127.0.0.1:{proxy.port}/0", **through) as second,
    ):
        yield proxy, first, second


def organization(first: RunningRanch) -> tuple[Api, str, str]:
    """acme's owner, and the member mia's key and key id; mia takes part in rooms r1 and r2."""
    owner = Api(
        first.url, Api(first.url, ADMIN_KEY).post("/organizations", {"id": "acme"})["owner"]["api_key"]
    )
    key = owner.post("/users", {"id": "mia", "name": "Mia"})["api_key"]
    for room in ("r1", "r2"):
        owner.post("/rooms", {"id": room, "title": room, "participants": [{"kind": "user", "id": "mia"}]})
    return owner, key, Api(first.url, key).get("/keys")["items"][0]["id"]


def assert_ended_by_revocation(live: Live) -> None:
    """The socket closes with 4401 after an UNAUTHENTICATED error frame, promptly, and never
    carried the post made after the revocation."""
    frames, code = live.until_closed(PROMPTLY)
    assert code == 4401
    assert frames[-1]["type"] == "error" and frames[-1]["error"]["code"] == "UNAUTHENTICATED"
    assert all(f["data"]["text"] != "after revocation" for f in frames if f["type"] == "message.created")


def test_a_key_revoked_on_one_replica_closes_its_websocket_on_another(database_url: str) -> None:
    with replicas(database_url) as (first, second):
        owner, key, key_id = organization(first)
        live = Live(second.url, key)
        try:
            live.subscribe(["acme.r1"])
            owner.post(f"/keys/{key_id}/revoke", None, status=200)
            owner.post("/rooms/acme.r1/messages", {"text": "after revocation"})
            assert_ended_by_revocation(live)
        finally:
            live.close()


def test_a_participant_removed_on_one_replica_stops_getting_the_room_on_another(database_url: str) -> None:
    with replicas(database_url) as (first, second):
        owner, key, _ = organization(first)
        live = Live(second.url, key)
        try:
            live.subscribe(["acme.r1", "acme.r2"])
            owner.call("DELETE", "/rooms/acme.r1/participants/user/acme.mia").raise_for_status()
            lost = live.until(lambda f: f["type"] == "error", timeout=PROMPTLY)[-1]
            owner.post("/rooms/acme.r1/messages", {"text": "after removal"})
            owner.post("/rooms/acme.r2/messages", {"text": "still here"})
            frames = live.until(lambda f: f["type"] == "message.created")
        finally:
            live.close()
    assert lost["room_id"] == "acme.r1" and lost["error"]["code"] == "NOT_FOUND"
    assert [f["data"]["text"] for f in frames if f["type"] == "message.created"] == ["still here"]


def test_a_revocation_missed_while_redis_was_cut_off_closes_the_websocket_once_redis_is_back(
    database_url: str,
) -> None:
    """The second replica reaches Redis through a proxy the test cuts: the revocation published
    meanwhile never reaches it, so it asks the database about the keys it holds open (every second
    while cut off, and before it hands out the events it missed): the post made after the revocation
    never reaches the socket."""
    with second_behind_a_proxy(database_url) as (proxy, first, second):
        owner, key, key_id = organization(first)
        live = Live(second.url, key)
        try:
            live.subscribe(["acme.r1"])
            proxy.cut()
            wait_until(lambda: fanout(second) == "reconnecting", RECONNECTED, "the fan-out is cut off")
            owner.post(f"/keys/{key_id}/revoke", None, status=200)
            owner.post(
                "/rooms/acme.r1/messages", {"text": "after revocation"}
            )  # on the replica that heard it
            proxy.restore()
            wait_until(lambda: fanout(second) == "connected", RECONNECTED, "the fan-out is back")
            assert_ended_by_revocation(live)
        finally:
            live.close()


def test_a_key_revoked_while_a_replica_is_cut_off_from_redis_is_refused_there_at_once(
    database_url: str,
) -> None:
    """A replica keeps each key's principal for 5 s, and a revocation published while its Redis is
    cut off never reaches it: until it hears the others again it serves no key from that cache, so
    the key revoked on the first replica is refused on the second's REST API and A2A binding on the
    very next call, though the second used it a moment before."""
    with second_behind_a_proxy(database_url) as (proxy, first, second):
        owner, key, key_id = organization(first)
        on_second = Api(second.url, key)

        def a2a() -> httpx.Response:
            message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}]}
            body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
            headers = {"A2A-Version": "1.0", "X-API-Key": key}
            return httpx.post(f"{second.url}/a2a/agents/greeter", json=body, headers=headers, timeout=30)

        assert on_second.call("GET", "/rooms").status_code == 200  # the key is in its cache now
        assert "result" in a2a().json()
        proxy.cut()
        wait_until(lambda: fanout(second) == "reconnecting", RECONNECTED, "the fan-out is cut off")
        owner.post(f"/keys/{key_id}/revoke", None, status=200)
        refused = on_second.call("GET", "/rooms")
        assert refused.status_code == 401, refused.text
        assert "revoked" in refused.json()["error"]["message"]
        assert a2a().json()["error"]["code"] == -32061  # UNAUTHENTICATED, on the binding's own terms
        assert on_second.call("GET", "/rooms").status_code == 401
        proxy.restore()


def fanout(replica: RunningRanch) -> str | None:
    """What the replica's /healthz says of its fan-out (connected, reconnecting)."""
    answer: str | None = httpx.get(f"{replica.url}/healthz", timeout=10).json().get("fanout")
    return answer
