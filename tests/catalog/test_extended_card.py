"""`GetExtendedAgentCard` answers, behind `--auth keys`, the card as this caller may use it: who the
hub takes them for and the rate limits of their calls; over JSON-RPC and HTTP+JSON, with the official
a2a-sdk client, and never for an agent the caller may not see."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from a2a.types import GetExtendedAgentCardRequest
from google.protobuf.json_format import MessageToDict

from _support.hubkit import ADMIN_KEY, Api, serve_ranch
from _support.sdk import sdk_client

CALLER_URI = "https://ranch.woi.dev/extensions/caller/v1"  # catalog/extended.py, docs/api.md

CONFIG = """
agents:
  - {id: greeter, kind: rules, skills: [{id: greet, name: Greeting, tags: [hello]}], rules: [{reply: "hi"}]}
"""


@pytest.mark.anyio
@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_each_caller_gets_the_card_as_they_may_use_it(tmp_path: Path, binding: str) -> None:
    database = f"sqlite+aiosqlite:///{tmp_path / 'k.db'}"
    with serve_ranch(CONFIG, database, auth="keys", caller_rate=7.0, caller_burst=9) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        acme_key = admin.post("/organizations", {"id": "acme"})["owner"]["api_key"]
        Api(hub.url, acme_key).post(
            "/agents", {"id": "scout", "kind": "rules", "visibility": "org", "rules": [{"reply": "scouted"}]}
        )
        async with httpx.AsyncClient(timeout=10) as http:
            public = (await http.get(f"{hub.agent_url('greeter')}/.well-known/agent-card.json")).json()
        assert public["capabilities"]["extendedAgentCard"] is True
        assert CALLER_URI not in str(public)  # the public card names no caller

        for agent in ("greeter", "acme.scout"):
            headers = {"X-API-Key": acme_key}
            async with sdk_client(hub.agent_url(agent), binding=binding, headers=headers) as client:
                card = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
            assert card.name == agent
            (caller,) = [e for e in card.capabilities.extensions if e.uri == CALLER_URI]
            params = MessageToDict(caller.params)
            assert params["caller"]["organization"] == "acme"
            assert params["rateLimits"]["perCaller"] == {"perSecond": 7.0, "burst": 9}
            assert {skill.id for skill in card.skills} >= ({"greet"} if agent == "greeter" else set())

        async with sdk_client(
            hub.agent_url("greeter"), binding=binding, headers={"X-API-Key": ADMIN_KEY}
        ) as c:
            mine = await c.get_extended_agent_card(GetExtendedAgentCardRequest())
        (caller,) = [e for e in mine.capabilities.extensions if e.uri == CALLER_URI]
        assert MessageToDict(caller.params)["caller"]["organization"] != "acme"

        # behind auth: no key, no extended card; another organization's agent stays hidden
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}}
        rest = f"{hub.agent_url('acme.scout')}/extendedAgentCard"
        async with httpx.AsyncClient(timeout=10) as http:
            refused = await http.post(hub.agent_url("greeter"), json=rpc, headers={"A2A-Version": "1.0"})
            seen = await http.get(rest, headers={"X-API-Key": acme_key, "A2A-Version": "1.0"})
            hidden = await http.get(rest, headers={"X-API-Key": ADMIN_KEY, "A2A-Version": "1.0"})
        assert refused.status_code == 401 and "result" not in refused.json()
        assert seen.status_code == 200 and seen.json()["name"] == "acme.scout"
        assert hidden.status_code == 404


@pytest.mark.anyio
async def test_the_extended_card_over_grpc(tmp_path: Path) -> None:
    from _support.grpc_client import grpc_client

    database = f"sqlite+aiosqlite:///{tmp_path / 'g.db'}"
    with serve_ranch(CONFIG, database, auth="keys", grpc_port=0, caller_burst=11) as hub:
        async with grpc_client(hub.agent_url("greeter"), metadata={"x-api-key": ADMIN_KEY}) as client:
            card = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
        assert card.name == "greeter"
        (caller,) = [e for e in card.capabilities.extensions if e.uri == CALLER_URI]
        assert MessageToDict(caller.params)["rateLimits"]["perCaller"]["burst"] == 11
        assert any(i.protocol_binding == "GRPC" for i in card.supported_interfaces)
