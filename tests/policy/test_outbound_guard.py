"""What a tenant's agents may make the hub call, judged when each connection is made.

Real servers on 127.0.0.1: the hub, the misbehaving peer (tests/_support/faulty.py), an "internal"
service and, for llm agents, the scripted model (tests/_support/fake_openai.py). Only 127.0.0.1 can
be bound here, so the hub's guard is given an exemption for the peer's own port and the model's (they
play public hosts); the internal service, on another port of 127.0.0.1, is what a tenant must never
reach.
"""

from __future__ import annotations

import ipaddress
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from _support.fake_openai import FakeOpenAI, text, tool_names, tools
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
    return _public(faulty.port)


def _public(*ports: int) -> Any:
    """An exemption: these ports of 127.0.0.1 play public hosts (the peer, the model provider)."""

    def exempt(address: IPAddress, port: int) -> bool:
        return port in ports and address == ipaddress.ip_address("127.0.0.1")

    return exempt


def _port(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None, url
    return port


def _llm(name: str, base_url: str, **fields: Any) -> dict[str, Any]:
    """A tenant's llm agent whose model (scripted under `name`) is the fake provider."""
    return {"id": name, "kind": "llm", "model": name, "base_url": base_url, **fields}


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


def completed(answer: dict[str, Any]) -> str:
    """The text of a COMPLETED task's status message (the agent's answer)."""
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", answer
    return " ".join(part.get("text", "") for part in task["status"]["message"]["parts"])


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


def test_a_tenant_mcp_server_inside_the_network_is_never_reached(
    tmp_path: Path, faulty: Faulty, fake: FakeOpenAI, base_url: str
) -> None:
    """MCP over streamable HTTP: an internal URL is refused at registration, naming the field; a
    server answering 307 to the internal one is not followed; a name that turns inward after it was
    checked (DNS rebinding) is refused when the connection is made, and that ends the turn."""
    database = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    internal_port = _port(faulty.internal.url)
    guard = UrlGuard(resolver=_rebinding("localhost"), exempt=_public(faulty.port, _port(base_url)))
    with serve_ranch(CONFIG, database, auth="keys", guard=guard) as hub:
        tenant = _tenant(hub.url)
        key = tenant.headers["X-API-Key"]

        def register(name: str, mcp_url: str) -> httpx.Response:
            body = _llm(name, base_url, mcp_servers=[{"name": "calc", "url": mcp_url}])
            return tenant.call("POST", "/agents", body)

        refused = register("inward", f"{faulty.internal.url}/mcp")
        assert refused.status_code == 422, refused.text
        error = refused.json()["error"]
        assert error["field"] == "mcp_servers[0].url" and "loopback" in error["message"], error

        assert register("bounced", f"{faulty.url}/redir307/mcp").status_code == 201
        fake.script("bounced", text("no tools today"))
        assert completed(ask(hub.agent_url("acme.bounced"), key)) == "no tools today"
        assert tool_names(fake.requests_for("bounced")[0]) == []  # the server's tools were not offered

        assert register("rebound", f"http://localhost:{internal_port}/mcp").status_code == 201  # public then
        text_ = failure(ask(hub.agent_url("acme.rebound"), key))
        assert "agent 'acme.rebound': MCP server 'calc': cannot connect" in text_, text_
        assert "localhost resolves to 127.0.0.1, a loopback address" in text_, text_
        assert "may not call it" in text_, text_
        assert fake.requests_for("rebound") == []  # the turn ended before the model was asked
    assert faulty.internal.hits == []


def test_call_remote_agent_of_a_tenant_never_reaches_the_internal_service(
    tmp_path: Path, faulty: Faulty, fake: FakeOpenAI, base_url: str
) -> None:
    """`call_remote_agent`: an internal target is refused at registration, naming the field; at call
    time a target whose card names the internal service, one that redirects there, and a name that
    turns inward after it was checked are each refused, and the model is told why."""
    database = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    internal_port = _port(faulty.internal.url)
    guard = UrlGuard(resolver=_rebinding("localhost"), exempt=_public(faulty.port, _port(base_url)))
    with serve_ranch(CONFIG, database, auth="keys", guard=guard) as hub:
        tenant = _tenant(hub.url)
        inward = _llm("inward", base_url, remote_agents=[f"{faulty.internal.url}/internal"])
        refused = tenant.call("POST", "/agents", inward)
        assert refused.status_code == 422, refused.text
        error = refused.json()["error"]
        assert error["field"] == "remote_agents[0]" and "loopback" in error["message"], error

        targets = {
            "cardssrf": f"{faulty.url}/ssrfcard",
            "bouncer": f"{faulty.url}/redir307/a2a",
            "rebound": f"http://localhost:{internal_port}/a2a",
        }
        remote = [{"name": name, "url": url} for name, url in targets.items()]
        assert (
            tenant.call("POST", "/agents", _llm("caller", base_url, remote_agents=remote)).status_code == 201
        )
        calls = [("call_remote_agent", {"agent": name, "message": "hi"}) for name in targets]
        fake.script("caller", tools(*calls), text("none of them answered"))
        answer = ask(hub.agent_url("acme.caller"), tenant.headers["X-API-Key"])
        assert completed(answer) == "none of them answered"
        shown = fake.requests_for("caller")[1]["messages"]
        cardssrf, bouncer, rebound = [m["content"] for m in shown if m["role"] == "tool"]
    assert "refusing to connect to 127.0.0.1" in cardssrf and "loopback" in cardssrf, cardssrf
    assert "may not call it" in cardssrf, cardssrf
    assert "HTTP 307" in bouncer and "not followed" in bouncer, bouncer
    assert "localhost resolves to 127.0.0.1, a loopback address" in rebound, rebound
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
