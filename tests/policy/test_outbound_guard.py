"""What a tenant's agents may make the hub call, judged when each connection is made.

Real servers on 127.0.0.1: the hub, the misbehaving peer (tests/_support/faulty.py) and an "internal"
service. Only 127.0.0.1 can be bound here, so the hub's guard is given an exemption for the
peer's own port (it plays a public host); the internal service, on another port of 127.0.0.1,
is what a tenant must never reach.
"""

from __future__ import annotations

import ipaddress
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from _support.faulty import Faulty, running_faulty
from _support.hubkit import ADMIN_KEY, Api, serve_ranch
from ranch.policy.egress import GuardedBackend, RefusedConnection, guarded_client
from ranch.policy.ssrf import IPAddress, UrlGuard, system_resolver

CONFIG = "agents:\n  - {id: echo, kind: echo}\n"


@pytest.fixture(scope="module")
def faulty() -> Iterator[Faulty]:
    with running_faulty() as peer:
        yield peer


def _peer_only(faulty: Faulty) -> Any:
    def exempt(address: IPAddress, port: int) -> bool:
        return port == faulty.port and address == ipaddress.ip_address("127.0.0.1")

    return exempt


def _tenant(hub_url: str) -> Api:
    owner = Api(hub_url, ADMIN_KEY).post("/organizations", {"id": "acme", "name": "Acme"})["owner"]
    return Api(hub_url, owner["api_key"])


def ask(agent_url: str, key: str) -> dict[str, Any]:
    """SendMessage as the tenant: the task (or the error) the hub answered with."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": "hi"}]}
        },
    }
    headers = {"A2A-Version": "1.0", "X-API-Key": key}
    answer: dict[str, Any] = httpx.post(agent_url, json=body, headers=headers, timeout=60).json()
    return answer


def failure(answer: dict[str, Any]) -> str:
    """The text of a FAILED task's status message (the hop's error)."""
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED", answer
    return " ".join(part.get("text", "") for part in task["status"]["message"]["parts"])


def test_a_card_naming_an_internal_interface_is_refused_and_never_called(
    tmp_path: Path, faulty: Faulty
) -> None:
    database = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    guard = UrlGuard(exempt=_peer_only(faulty))
    with serve_ranch(CONFIG, database, auth="keys", guard=guard) as hub:
        tenant = _tenant(hub.url)
        refused = tenant.call(
            "POST", "/agents", {"id": "cardssrf", "kind": "remote", "url": f"{faulty.url}/ssrfcard"}
        )
        assert refused.status_code == 422, refused.text
        error = refused.json()["error"]
        assert error["field"] == "url" and "supportedInterfaces[0].url" in error["message"], error
        assert "loopback" in error["message"], error
        # a card that turns inward after registration: the call itself is refused
        flip = {"id": "flip", "kind": "remote", "url": f"{faulty.url}/flipcard", "card_ttl": 0}
        assert tenant.call("POST", "/agents", flip).status_code == 201
        assert "ok from faulty" in str(ask(hub.agent_url("acme.flip"), tenant.headers["X-API-Key"]))
        faulty.flipped = True
        try:
            text = failure(ask(hub.agent_url("acme.flip"), tenant.headers["X-API-Key"]))
        finally:
            faulty.flipped = False
        assert "agent 'acme.flip'" in text and "refusing to connect to 127.0.0.1" in text, text
        assert "loopback" in text and "may not call it" in text, text
        # the operator's own agents may call the same address (config agents are trusted)
        operator = Api(hub.url, ADMIN_KEY).call(
            "POST", "/agents", {"id": "ops", "kind": "remote", "url": f"{faulty.url}/ssrfcard"}
        )
        assert operator.status_code == 201, operator.text
    assert faulty.internal.hits == []


def test_a_tenant_provider_redirect_is_not_followed(tmp_path: Path, faulty: Faulty) -> None:
    database = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    with serve_ranch(CONFIG, database, auth="keys", guard=UrlGuard(exempt=_peer_only(faulty))) as hub:
        tenant = _tenant(hub.url)
        body = {"id": "llmredir", "kind": "llm", "model": "m", "base_url": f"{faulty.url}/redir307/v1"}
        assert tenant.call("POST", "/agents", body).status_code == 201
        text = failure(ask(hub.agent_url("acme.llmredir"), tenant.headers["X-API-Key"]))
    assert "agent 'acme.llmredir'" in text and "HTTP 307" in text and "not followed" in text, text
    assert faulty.internal.hits == []


def _rebinding(name: str) -> Any:
    """A DNS name that answers public once (when registration checks it), loopback afterwards."""
    asked: list[str] = []

    async def resolve(host: str, port: int) -> Sequence[str]:
        if host != name:
            return await system_resolver(host, port)
        asked.append(host)
        return ["93.184.216.34"] if len(asked) == 1 else ["127.0.0.1"]

    return resolve


def test_dns_rebinding_cannot_reach_an_internal_address(tmp_path: Path, faulty: Faulty) -> None:
    database = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    internal_port = faulty.internal.url.rsplit(":", 1)[1]
    guard = UrlGuard(resolver=_rebinding("localhost"))
    with serve_ranch(CONFIG, database, auth="keys", guard=guard) as hub:
        tenant = _tenant(hub.url)
        body = {
            "id": "rebound",
            "kind": "llm",
            "model": "m",
            "base_url": f"http://localhost:{internal_port}/v1",
        }
        assert tenant.call("POST", "/agents", body).status_code == 201  # public when it was checked
        text = failure(ask(hub.agent_url("acme.rebound"), tenant.headers["X-API-Key"]))
    assert "agent 'acme.rebound'" in text and "localhost resolves to 127.0.0.1, a loopback address" in text, (
        text
    )
    assert faulty.internal.hits == []


@pytest.mark.anyio
async def test_the_guarded_client_connects_to_the_address_it_checked(faulty: Faulty) -> None:
    """One resolution per connection: the socket goes to the judged address; no redirect is followed."""
    answers = {"peer.example": ["127.0.0.1"]}

    async def resolve(host: str, port: int) -> Sequence[str]:
        return answers[host]

    guard = UrlGuard(resolver=resolve, exempt=_peer_only(faulty))
    async with guarded_client(guard, timeout=10) as client:
        card = await client.get(f"http://peer.example:{faulty.port}/ok/.well-known/agent-card.json")
        assert card.status_code == 200 and card.json()["name"] == "faulty-ok"
        internal_port = int(faulty.internal.url.rsplit(":", 1)[1])
        with pytest.raises(httpx.ConnectError, match="a loopback address") as refused:
            await client.post(f"http://peer.example:{internal_port}/internal", json={})
        assert isinstance(refused.value.__cause__, RefusedConnection)
        redirected = await client.post(f"http://peer.example:{faulty.port}/redir307/x", json={})
        assert redirected.status_code == 307  # answered, not followed
    with pytest.raises(RefusedConnection):
        await GuardedBackend(guard).connect_unix_socket("/tmp/anything.sock")
    assert faulty.internal.hits == []
