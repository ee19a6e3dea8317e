"""Opening a WebSocket: a key revoked meanwhile still ends it; a database that cannot be asked
about the key is said so.

The key is looked up, then the connection is accepted; a revocation that lands in between must not
be missed: the connection registers with the revocations before it is accepted, so it gets the
UNAUTHENTICATED error frame and a close with 4401 at once, without sending anything. A lookup the
database cannot answer (locked, its pool spent by a burst of connections) gets a STORE_UNAVAILABLE
error frame and 1013 (try again), not an HTTP 500 to the handshake.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from starlette.websockets import WebSocket

from _support.hubkit import ADMIN_KEY, Api, Live, serve_ranch
from _support.probes import SLEEPER
from ranch.identity.resolver import KeyResolver, KnownKey

PROMPTLY = 5.0


def test_a_key_revoked_between_its_lookup_and_the_accept_ends_the_websocket(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serve_ranch(SLEEPER, database_url, auth="keys") as hub:
        owner_key = Api(hub.url, ADMIN_KEY).post("/organizations", {"id": "acme"})["owner"]["api_key"]
        owner = Api(hub.url, owner_key)
        key = owner.post("/users", {"id": "mia", "name": "mia"})["api_key"]
        owner.post("/rooms", {"id": "r1", "title": "r1", "participants": [{"kind": "user", "id": "mia"}]})
        key_id = Api(hub.url, key).get("/keys")["items"][0]["id"]
        accept = WebSocket.accept
        revoked: list[int] = []

        async def revoke_then_accept(self: WebSocket, *args: Any, **kwargs: Any) -> None:
            if not revoked:  # the key was looked up and found good; now it is revoked, then accepted
                async with httpx.AsyncClient(base_url=f"{hub.url}/api/v1", trust_env=False) as client:
                    answer = await client.post(f"/keys/{key_id}/revoke", headers={"X-API-Key": owner_key})
                revoked.append(answer.status_code)
            await accept(self, *args, **kwargs)

        monkeypatch.setattr(WebSocket, "accept", revoke_then_accept)
        live = Live(hub.url, key)
        try:
            frames, code = live.until_closed(PROMPTLY)  # the client sends nothing: no frame to check
        finally:
            live.close()
        assert revoked == [200]
        assert code == 4401
        assert [f["error"]["code"] for f in frames] == ["UNAUTHENTICATED"]


def test_a_key_the_database_cannot_look_up_gets_an_error_frame_and_try_again(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serve_ranch(SLEEPER, database_url) as hub:

        async def pool_spent(self: KeyResolver, *args: Any) -> KnownKey:
            raise sa.exc.TimeoutError("QueuePool limit of size 5 overflow 10 reached")

        monkeypatch.setattr(KeyResolver, "fresh_key", pool_spent)
        live = Live(hub.url, ADMIN_KEY)
        try:
            frames, code = live.until_closed(PROMPTLY)
        finally:
            live.close()
        assert code == 1013
        assert [f["error"]["code"] for f in frames] == ["STORE_UNAVAILABLE"]
