"""API keys with an optional expiry, listed without the key, and revoked: at once on every entry.

A revoked or expired key answers 401 on REST, A2A (`auth: keys`), /mcp and the WebSocket right
away, including where a key's principal is cached (A2A, /mcp) and on a WebSocket opened before.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect
from websockets.sync.connection import Connection

from _support.hubkit import ADMIN_KEY, Api, RunningRanch, serve_ranch

CONFIG = """
agents:
  - {id: greeter, kind: echo}
"""


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[RunningRanch]:
    with serve_ranch(CONFIG, f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}", auth="keys") as served:
        yield served


def a2a(hub: RunningRanch, key: str) -> int:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    return httpx.post(
        hub.agent_url("greeter"), json=body, headers={"A2A-Version": "1.0", "X-API-Key": key}
    ).status_code


def mcp(hub: RunningRanch, key: str) -> int:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    headers = {"X-API-Key": key, "Accept": "application/json, text/event-stream"}
    return httpx.post(f"{hub.url}/mcp", json=initialize, headers=headers, timeout=30).status_code


def rest(hub: RunningRanch, key: str) -> int:
    return Api(hub.url, key).call("GET", "/me").status_code


def open_socket(hub: RunningRanch, key: str) -> ClientConnection:
    return connect(hub.url.replace("http://", "ws://", 1) + f"/api/v1/ws?token={key}", open_timeout=10)


def ping(live: Connection) -> int:
    """200 for a pong; the close code when the server ends the connection instead."""
    try:
        with contextlib.suppress(ConnectionClosed):  # closed already: its frames are still queued
            live.send(json.dumps({"type": "ping"}))
        while True:
            if json.loads(live.recv(timeout=10))["type"] == "pong":
                return 200
    except ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd else 1006


def websocket(hub: RunningRanch, key: str) -> int:
    with open_socket(hub, key) as live:
        return ping(live)


def every_entry(hub: RunningRanch, key: str) -> dict[str, int]:
    return {
        "rest": rest(hub, key),
        "a2a": a2a(hub, key),
        "mcp": mcp(hub, key),
        "websocket": websocket(hub, key),
    }


ALLOWED = {"rest": 200, "a2a": 200, "mcp": 200, "websocket": 200}
REFUSED = {"rest": 401, "a2a": 401, "mcp": 401, "websocket": 4401}


def acme(hub: RunningRanch) -> Api:
    owner = Api(hub.url, ADMIN_KEY).post("/organizations", {"id": "acme"})["owner"]["api_key"]
    return Api(hub.url, owner)


def test_a_revoked_key_answers_401_at_once_on_every_entry(hub: RunningRanch) -> None:
    owner = acme(hub)
    created = owner.post("/keys", {})
    key, key_id = created["api_key"], created["key"]["id"]
    assert every_entry(hub, key) == ALLOWED  # A2A and /mcp now hold it in their cache
    live = open_socket(hub, key)
    try:
        assert ping(live) == 200
        revoked = owner.post(f"/keys/{key_id}/revoke", None, status=200)
        assert revoked["revoked"] is True and revoked["revoked_at"]
        assert every_entry(hub, key) == REFUSED
        assert ping(live) == 4401  # a socket opened before the revocation ends at its next frame
    finally:
        live.close()
    message = Api(hub.url, key).call("GET", "/me").json()["error"]["message"]
    assert message == "unknown or revoked API key"
    assert rest(hub, owner.headers["X-API-Key"]) == 200  # the owner's other key is untouched


def test_an_expired_key_answers_401_at_once_on_every_entry(hub: RunningRanch) -> None:
    owner = acme(hub)
    expires = time.time() + 2.0
    at = datetime.fromtimestamp(expires, UTC).isoformat().replace("+00:00", "Z")
    created = owner.post("/keys", {"expires_at": at})
    key = created["api_key"]
    assert created["key"]["expires_at"] == at
    assert every_entry(hub, key) == ALLOWED
    live = open_socket(hub, key)
    try:
        time.sleep(max(0.0, expires - time.time()) + 0.05)  # past the expiry, well inside the 5 s cache
        assert every_entry(hub, key) == REFUSED
        assert ping(live) == 4401
    finally:
        live.close()
    message = Api(hub.url, key).call("GET", "/me").json()["error"]["message"]
    assert message.startswith(f"the API key {key[:7]}… expired at ")


def test_keys_are_listed_without_the_key_and_only_to_whom_they_concern(hub: RunningRanch) -> None:
    owner = acme(hub)
    member = owner.post("/users", {"id": "mia", "name": "Mia", "role": "member"})
    mia = Api(hub.url, member["api_key"])
    agent = owner.post("/agents", {"id": "inbox", "kind": "external"})

    own = mia.post("/keys", {"expires_in": 3600})
    assert own["key"]["owner"] == {"kind": "user", "id": "acme.mia"} and own["key"]["expires_at"]
    for_agent = owner.post("/keys", {"owner": {"kind": "agent", "id": "inbox"}})
    assert (
        rest(hub, for_agent["api_key"]) == 200
        and Api(hub.url, for_agent["api_key"]).get("/me")["id"] == "acme.inbox"
    )
    for_mia = owner.post("/keys", {"owner": {"kind": "user", "id": "mia"}})

    listed = mia.get("/keys")["items"]
    assert {own["key"]["id"], for_mia["key"]["id"]} < {k["id"] for k in listed}  # and her first key
    assert len(listed) == 3 and all(k["owner"] == {"kind": "user", "id": "acme.mia"} for k in listed)
    assert {"id", "prefix", "owner", "created_at", "expires_at", "revoked"} <= set(listed[0])
    everything = owner.get("/keys")["items"]
    assert len(everything) == 6  # the owner's, mia's three, the agent's two (one from its registration)
    text = json.dumps(everything)
    assert all(k not in text for k in (own["api_key"], for_agent["api_key"], agent["api_key"]))

    # a member may not act for others; another organization's keys are not there at all
    denied = mia.call("POST", "/keys", {"owner": {"kind": "user", "id": "acme.owner"}})
    assert denied.status_code == 403, denied.text
    owners_key = next(k for k in everything if k["owner"]["id"] == "acme.owner")
    assert mia.call("POST", f"/keys/{owners_key['id']}/revoke").status_code == 404
    admin = Api(hub.url, ADMIN_KEY)
    assert admin.call("POST", f"/keys/{owners_key['id']}/revoke").status_code == 404
    missing = owner.call("POST", "/keys", {"owner": {"kind": "user", "id": "admin"}})  # the default org's
    assert missing.status_code == 404 and missing.json()["error"]["field"] == "owner.id"
    assert owner.post(f"/keys/{for_mia['key']['id']}/revoke", None, status=200)["revoked"] is True


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"expires_in": 0}, "expires_in"),
        ({"expires_in": "soon"}, "expires_in"),
        ({"expires_at": "tomorrow"}, "expires_at"),
        ({"expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
        ({"expires_at": "2999-01-01T00:00:00Z", "expires_in": 60}, "expires_in"),
        ({"owner": {"kind": "robot", "id": "x"}}, "owner"),
    ],
)
def test_a_bad_expiry_or_owner_is_refused_naming_the_field(
    hub: RunningRanch, body: dict[str, Any], field: str
) -> None:
    answer = Api(hub.url, ADMIN_KEY).call("POST", "/keys", body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["field"] == field


# -- keys made with keys (audit 2, N5), and the keys of a removed agent (N16) ---------------------------

MOST_LIVE_KEYS = 20
"""The cap on one principal's live keys (docs/api.md)."""


def seconds(at: str) -> float:
    return datetime.fromisoformat(at).timestamp()


def a2a_mcp_rest(hub: RunningRanch, key: str) -> dict[str, int]:
    """The entries that keep a key's principal cached (A2A, /mcp), and REST, which never does."""
    return {"rest": rest(hub, key), "a2a": a2a(hub, key), "mcp": mcp(hub, key)}


def test_a_key_made_with_a_key_never_outlives_it_and_is_revoked_with_it(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url, auth="keys") as hub:
        owner = acme(hub)
        mia = Api(hub.url, owner.post("/users", {"id": "mia", "name": "Mia"})["api_key"])
        short = owner.post("/keys", {"owner": {"kind": "user", "id": "mia"}, "expires_in": 60})
        short_key, short_id = short["api_key"], short["key"]["id"]
        with_short = Api(hub.url, short_key)

        minted = with_short.post("/keys", {})  # no expiry asked: the key making it is the limit
        assert minted["key"]["expires_at"] == short["key"]["expires_at"]
        sooner = Api(hub.url, minted["api_key"]).post("/keys", {"expires_in": 30})  # and a key made with that
        assert seconds(sooner["key"]["expires_at"]) <= seconds(short["key"]["expires_at"])
        for later in ({"expires_in": 3600}, {"expires_at": "2030-01-01T00:00:00Z"}):
            refused = with_short.call("POST", "/keys", later)
            assert refused.status_code == 400, refused.text
            field = next(iter(later))
            assert (
                refused.json()["error"]["field"] == field
                and "never outlives" in refused.json()["error"]["message"]
            )

        for key in (short_key, minted["api_key"], sooner["api_key"]):
            assert a2a_mcp_rest(hub, key) == {"rest": 200, "a2a": 200, "mcp": 200}  # now cached on A2A, /mcp
        owner.post(f"/keys/{short_id}/revoke", None, status=200)
        for key in (short_key, minted["api_key"], sooner["api_key"]):
            assert a2a_mcp_rest(hub, key) == {"rest": 401, "a2a": 401, "mcp": 401}
        listed = {k["id"]: k for k in owner.get("/keys")["items"]}
        assert listed[minted["key"]["id"]]["revoked"] and listed[sooner["key"]["id"]]["revoked"]
        assert mia.get("/me")["id"] == "acme.mia"  # her key from the owner is not one of them
        revoked = Api(hub.url, minted["api_key"]).call("POST", "/keys", {})
        assert revoked.status_code == 401  # nor can a revoked key make one
        assert owner.post("/keys", {})["key"]["expires_at"] is None  # a key that never expires: no limit
        lasting = owner.post("/keys", {"expires_in": 3600})
        assert seconds(lasting["key"]["expires_at"]) == pytest.approx(time.time() + 3600, abs=60)


def test_no_one_holds_more_than_twenty_live_keys(hub: RunningRanch) -> None:
    owner = acme(hub)
    mia = Api(hub.url, owner.post("/users", {"id": "mia", "name": "Mia"})["api_key"])  # her first key
    made = [mia.post("/keys", {}) for _ in range(MOST_LIVE_KEYS - 1)]
    assert len(mia.get("/keys")["items"]) == MOST_LIVE_KEYS

    refused = mia.call("POST", "/keys", {})
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "CONFLICT" and f"({MOST_LIVE_KEYS})" in error["message"]
    for_her = owner.call("POST", "/keys", {"owner": {"kind": "user", "id": "mia"}})  # an admin neither
    assert for_her.status_code == 409 and for_her.json()["error"]["field"] == "owner"

    mia.post(f"/keys/{made[0]['key']['id']}/revoke", None, status=200)  # a revoked key is not live
    assert mia.post("/keys", {"expires_in": 60})["key"]["expires_at"]
    assert mia.call("POST", "/keys", {}).status_code == 409


def test_a_removed_agents_keys_answer_401_at_once_on_every_entry(hub: RunningRanch) -> None:
    owner = acme(hub)
    first = owner.post("/agents", {"id": "ext", "kind": "external"})["api_key"]
    second = owner.post("/keys", {"owner": {"kind": "agent", "id": "ext"}})["api_key"]
    for key in (first, second):
        assert a2a_mcp_rest(hub, key) == {"rest": 200, "a2a": 200, "mcp": 200}  # now cached on A2A, /mcp
    assert owner.call("DELETE", "/agents/acme.ext").status_code == 204
    for key in (first, second):
        assert a2a_mcp_rest(hub, key) == {"rest": 401, "a2a": 401, "mcp": 401}
    assert all(k["revoked"] for k in owner.get("/keys")["items"] if k["owner"]["id"] == "acme.ext")
    owner.post("/agents", {"id": "ext", "kind": "external"})  # an agent of the same id: not its keys
    assert a2a_mcp_rest(hub, first) == {"rest": 401, "a2a": 401, "mcp": 401}
