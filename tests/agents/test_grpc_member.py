"""A remote member that speaks gRPC: an a2a-sdk gRPC server joins a team, and ranch calls it with the
a2a-sdk gRPC client transport, sending its interface's tenant; timeouts, cancel and the outbound
guard hold as for HTTP members."""

from __future__ import annotations

import ipaddress
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from a2a.types import AgentCard, AgentInterface, TaskState

from _support.grpc_peer import running_grpc_peer
from _support.hubkit import ADMIN_KEY, Api, serve_ranch, wait_until
from _support.sdk import ask, said, sdk_client, trail_of
from ranch.agents.remote_grpc import grpc_client
from ranch.exceptions import AgentUnavailable
from ranch.policy.ssrf import IPAddress, UrlGuard
from ranch.wire.client_routing import URI

TIMEOUT = 15.0


def team(url: str, *, timeout: float = 60.0, binding: str = "auto") -> str:
    return f"""
agents:
  - id: triage
    kind: rules
    rules:
      - {{match: ".*", reply: "asking far", route: far, reason: the peer knows}}
  - id: far
    kind: remote
    url: {url}
    timeout: {timeout}
    binding: {binding}
teams:
  - id: desk
    members: [triage, far]
    default_agent: triage
"""


@pytest.mark.anyio
async def test_a_grpc_peer_joins_a_team_and_routes(tmp_path: Path) -> None:
    with running_grpc_peer("router", route_to="user", reason="done") as peer:
        with serve_ranch(team(peer.url), tmp_path / "t.db") as ranch:
            async with sdk_client(ranch.agent_url("desk")) as client:
                with anyio.fail_after(TIMEOUT):
                    task = await ask(client, "hello far away")
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, said(task)
        assert [hop["agent"] for hop in trail_of(task)] == ["triage", "far"]
        assert trail_of(task)[-1]["recipient"] == "user"
        assert said(task).startswith("router saw:") and "hello far away" in said(task)
        assert peer.calls.tenants == ["peer-tenant"]  # the interface's tenant, with every request
        assert URI in peer.calls.metadata[0]["a2a-extensions"]  # routing negotiated over metadata
        (received,) = peer.recorder.messages
        assert "hello far away" in received.text


@pytest.mark.anyio
async def test_a_slow_grpc_member_times_out_and_its_task_is_cancelled(tmp_path: Path) -> None:
    with running_grpc_peer("slow", delay=30) as peer:
        with serve_ranch(team(peer.url, timeout=1, binding="grpc"), tmp_path / "t.db") as ranch:
            async with sdk_client(ranch.agent_url("desk")) as client:
                with anyio.fail_after(TIMEOUT):
                    task = await ask(client, "take your time")
            wait_until(lambda: peer.recorder.cancelled, what="the peer's task cancelled over gRPC")
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert "far" in said(task) and "1" in said(task)


@pytest.mark.anyio
async def test_the_guard_judges_a_grpc_target() -> None:
    card = AgentCard(name="inward")
    interface = AgentInterface(protocol_binding="GRPC", protocol_version="1.0", url="127.0.0.1:50051")
    with pytest.raises(AgentUnavailable, match="loopback"):
        await grpc_client("inward", card, interface, UrlGuard(), 1 << 20)
    allowed = await grpc_client("inward", card, interface, UrlGuard(allow_loopback=True), 1 << 20)
    await allowed.close()


def _public(*ports: int) -> Any:
    """A guard exemption: these ports of 127.0.0.1 play public hosts (only loopback can be bound here)."""

    def exempt(address: IPAddress, port: int) -> bool:
        return port in ports and address == ipaddress.ip_address("127.0.0.1")

    return exempt


def _ask(agent_url: str, key: str) -> dict[str, Any]:
    message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": "hi"}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    headers = {"A2A-Version": "1.0", "X-API-Key": key}
    answer: dict[str, Any] = httpx.post(agent_url, json=body, headers=headers, timeout=60).json()
    return answer


def test_a_tenants_grpc_member_is_judged_by_the_guard(tmp_path: Path) -> None:
    """A tenant's agent whose card's GRPC interface is internal is refused at registration, naming it;
    one whose interface the guard allows is registered and called over gRPC, at the judged address."""
    with running_grpc_peer("router", route_to="user") as peer:
        card_port = int(peer.url.rsplit(":", 1)[1])
        database = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
        inward = UrlGuard(exempt=_public(card_port))  # the card is public, its gRPC port is not
        with serve_ranch(CONFIG, database, auth="keys", guard=inward) as hub:
            tenant = _tenant(hub.url)
            refused = tenant.call("POST", "/agents", {"id": "far", "kind": "remote", "url": peer.url})
            assert refused.status_code == 422, refused.text
            error = refused.json()["error"]
            assert error["field"] == "url" and "supportedInterfaces[0].url" in error["message"], error
            assert "loopback" in error["message"], error
        public = UrlGuard(exempt=_public(card_port, peer.grpc_port))
        with serve_ranch(CONFIG, f"{database}-2", auth="keys", guard=public) as hub:
            tenant = _tenant(hub.url)
            created = tenant.call("POST", "/agents", {"id": "far", "kind": "remote", "url": peer.url})
            assert created.status_code == 201, created.text
            answer = _ask(hub.agent_url("acme.far"), tenant.headers["X-API-Key"])
        assert "router saw: hi" in str(answer), answer
        assert peer.calls.tenants == ["peer-tenant"]


CONFIG = "agents:\n  - {id: echo, kind: echo}\n"


def _tenant(hub_url: str) -> Api:
    owner = Api(hub_url, ADMIN_KEY).post("/organizations", {"id": "acme", "name": "Acme"})["owner"]
    return Api(hub_url, owner["api_key"])
