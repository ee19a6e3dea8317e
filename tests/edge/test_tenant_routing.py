"""One endpoint for every agent (A2A 1.0 multi-tenancy): JSON-RPC at POST /a2a with `params.tenant`,
HTTP+JSON at /a2a/{tenant}/..., beside the per-agent URLs; each card lists them with its tenant."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import GetTaskRequest, SendMessageRequest

from _support.hubkit import ADMIN_KEY, RunningRanch, serve_ranch
from _support.sdk import trail_of, user_message
from ranch.cli.demo import DEMO_YAML

TIMEOUT = 10.0
V1 = {"A2A-Version": "1.0"}
PAPERS = "find papers on quantum error correction"


@pytest.fixture(scope="module")
def ranch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRanch]:
    with serve_ranch(DEMO_YAML, tmp_path_factory.mktemp("tenants") / "t.db") as served:
        yield served


@contextlib.asynccontextmanager
async def tenant_client(ranch: RunningRanch, agent_id: str, binding: str) -> AsyncIterator[Client]:
    """An a2a-sdk client that keeps only the card's interface at /a2a (it sends the tenant)."""
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        card = await A2ACardResolver(http, ranch.agent_url(agent_id)).get_agent_card()
        keep = [i for i in card.supported_interfaces if i.tenant and i.protocol_binding == binding]
        assert [(i.url, i.tenant) for i in keep] == [(f"{ranch.url}/a2a", agent_id)]
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(keep)
        config = ClientConfig(httpx_client=http, streaming=False, supported_protocol_bindings=[binding])
        yield ClientFactory(config).create(card)


def rpc(url: str, method: str, params: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    return httpx.post(url, json=body, headers={**V1, **(headers or {})}, timeout=TIMEOUT).json()


def message() -> dict[str, Any]:
    return {"role": "ROLE_USER", "messageId": str(uuid.uuid4()), "parts": [{"text": "hi"}]}


@pytest.mark.anyio
@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_a_team_turn_at_the_one_endpoint(ranch: RunningRanch, binding: str) -> None:
    async with tenant_client(ranch, "helpdesk", binding) as client:
        with anyio.fail_after(TIMEOUT):
            (answer,) = [
                r async for r in client.send_message(SendMessageRequest(message=user_message(PAPERS)))
            ]
            task = await client.get_task(GetTaskRequest(id=answer.task.id))
    assert [hop["agent"] for hop in trail_of(task)] == ["triage", "researcher", "triage"]


def test_unknown_tenant_is_refused_as_an_unknown_agent(ranch: RunningRanch) -> None:
    by_tenant = rpc(f"{ranch.url}/a2a", "SendMessage", {"tenant": "nobody", "message": message()})
    by_path = rpc(ranch.agent_url("nobody"), "SendMessage", {"message": message()})
    assert by_tenant["error"]["code"] == by_path["error"]["code"] == -32050
    assert by_tenant["error"]["message"] == by_path["error"]["message"]
    assert by_tenant["id"] == 7

    rest = httpx.get(f"{ranch.url}/a2a/nobody/tasks", headers=V1, timeout=TIMEOUT)
    at_path = httpx.get(f"{ranch.agent_url('nobody')}/tasks", headers=V1, timeout=TIMEOUT)
    assert rest.status_code == at_path.status_code == 404
    assert rest.json() == at_path.json()


def test_a_call_at_the_one_endpoint_without_a_tenant_names_the_field(ranch: RunningRanch) -> None:
    refused = rpc(f"{ranch.url}/a2a", "SendMessage", {"message": message()})
    assert refused["error"]["code"] == -32602
    assert "params.tenant" in refused["error"]["message"]
    assert refused["id"] == 7


def test_keys_hold_at_the_one_endpoint(tmp_path: Path) -> None:
    with serve_ranch(DEMO_YAML, tmp_path / "t.db", auth="keys") as keyed:
        params = {"tenant": "echo", "message": message()}
        refused = rpc(f"{keyed.url}/a2a", "SendMessage", params)
        answered = rpc(f"{keyed.url}/a2a", "SendMessage", params, {"X-API-Key": ADMIN_KEY})
    assert refused["error"]["code"] == -32061
    assert "result" in answered, answered
