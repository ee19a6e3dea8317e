"""`auth: keys` on every entry: A2A JSON-RPC (fast path and full stack, 1.0 and 0.3), A2A
HTTP+JSON, the REST API, the WebSocket and /mcp; and tenants that never see each other."""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from a2a.types import CancelTaskRequest, GetTaskRequest, ListTasksRequest
from a2a.utils.errors import TaskNotFoundError
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from _support.hubkit import ADMIN_KEY, Api, Live, serve_ranch, wait_until
from _support.sdk import sdk_client, send, user_message

CONFIG = """
agents:
  - id: triage
    kind: rules
    rules: [{reply: "Triage heard: {text}"}]
  - id: greeter
    kind: rules
    rules: [{reply: "Hello from greeter: {text}"}]
teams:
  - {id: desk, name: Desk, members: [triage], default_agent: triage}
"""
V1 = {"A2A-Version": "1.0", "Content-Type": "application/json"}


def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}


def send_params(text: str = "hi") -> dict[str, Any]:
    return {"message": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}}


def assert_unauthorized(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    assert "Bearer" in response.headers["www-authenticate"]


def test_every_a2a_entry_and_mcp_refuse_a_call_without_a_valid_key(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url, auth="keys") as hub:
        url = hub.agent_url("desk")
        for key_headers in ({}, {"X-API-Key": "rk_wrong"}, {"Authorization": "Bearer rk_wrong"}):
            # JSON-RPC 1.0: the fast path
            answer = httpx.post(url, json=rpc("SendMessage", send_params()), headers={**V1, **key_headers})
            assert_unauthorized(answer)
            assert answer.json()["error"]["code"] == -32061 and answer.json()["id"] == 7
            # JSON-RPC 0.3 (no A2A-Version): the full stack
            legacy = httpx.post(url, json=rpc("message/send", send_params()), headers=key_headers)
            assert_unauthorized(legacy)
            assert legacy.json()["error"]["code"] == -32061
            # HTTP+JSON, both versions
            for version in ("1.0", "0.3"):
                rest = httpx.post(
                    f"{url}/message:send",
                    json=send_params(),
                    headers={"A2A-Version": version, **key_headers},
                )
                assert_unauthorized(rest)
                assert rest.json()["error"]["status"] == "UNAUTHENTICATED"
            assert_unauthorized(httpx.get(f"{url}/tasks", headers={"A2A-Version": "1.0", **key_headers}))
            # /mcp
            mcp = httpx.post(
                f"{hub.url}/mcp",
                json=rpc("tools/list", {}),
                headers={"Accept": "application/json, text/event-stream", **key_headers},
            )
            assert_unauthorized(mcp)
            assert mcp.json()["error"]["code"] == -32061
            # the REST API
            assert_unauthorized(httpx.get(f"{hub.url}/api/v1/me", headers=key_headers))

        # cards stay public and say how to authenticate
        card = httpx.get(f"{url}/.well-known/agent-card.json").json()
        assert card["securitySchemes"]["apiKey"]["apiKeySecurityScheme"] == {
            "location": "header",
            "name": "X-API-Key",
            "description": "a ranch API key (docs/api.md)",
        }
        assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
        assert card["securityRequirements"] == [{"schemes": {"apiKey": {}}}, {"schemes": {"bearer": {}}}]
        assert {a["id"] for a in httpx.get(f"{hub.url}/a2a/agents").json()["agents"]} >= {"desk", "greeter"}

        # with a key, both header forms work on both bindings
        ok = httpx.post(url, json=rpc("SendMessage", send_params()), headers={**V1, "X-API-Key": ADMIN_KEY})
        assert ok.status_code == 200 and "result" in ok.json(), ok.text
        ok = httpx.post(
            f"{url}/message:send",
            json=send_params(),
            headers={"A2A-Version": "1.0", "Authorization": f"Bearer {ADMIN_KEY}"},
        )
        assert ok.status_code == 200, ok.text


def test_without_auth_a2a_stays_open_and_cards_declare_no_schemes(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        url = hub.agent_url("greeter")
        answer = httpx.post(url, json=rpc("SendMessage", send_params()), headers=V1)
        assert "result" in answer.json(), answer.text
        assert "securitySchemes" not in httpx.get(f"{url}/.well-known/agent-card.json").json()
        assert_unauthorized(httpx.get(f"{hub.url}/api/v1/me"))  # the REST API always needs a key


def test_the_websocket_refuses_a_missing_or_unknown_key(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url, auth="keys") as hub:
        live = Live(hub.url, "rk_wrong")
        frame = live.recv()
        assert frame["type"] == "error" and frame["error"]["code"] == "UNAUTHENTICATED"
        live.close()


async def _mcp_tools(base_url: str, key: str) -> tuple[set[str], Any]:
    async with (
        httpx2.AsyncClient(headers={"X-API-Key": key}, timeout=30) as http,
        Client(streamable_http_client(f"{base_url}/mcp", http_client=http), cache=None) as client,
    ):
        names = {tool.name for tool in (await client.list_tools()).tools}
        refused = await client.call_tool("ask_acme__secret", {"message": "hi"})
        return names, refused


def test_tenants_see_only_their_own_tasks_rooms_and_agents(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url, auth="keys") as hub:
        admin = Api(hub.url, ADMIN_KEY)
        acme = admin.post("/organizations", {"id": "acme", "name": "Acme"})
        acme_key = acme["owner"]["api_key"]
        other = Api(hub.url, acme_key)
        other.post("/agents", {"id": "secret", "kind": "echo", "name": "Secret", "visibility": "org"})
        room = admin.post("/rooms", {"title": "Ops", "participants": [{"kind": "agent", "id": "greeter"}]})
        admin.post(f"/rooms/{room['id']}/messages", {"text": "@greeter secret plans"})
        wait_until(lambda: len(admin.messages(room["id"])) == 2, what="the greeter's reply")
        execution = admin.executions(room["id"])["greeter"]["id"]

        anyio.run(_tasks_are_their_owners, hub.agent_url, execution, room["id"], acme_key)
        assert [m["text"] for m in admin.messages(room["id"])][-1] != "hello?"  # not posted into the room

        # the org-private agent: its organization reaches it, the others get AgentNotFound
        secret = hub.agent_url("acme.secret")  # the organization's own id
        for headers in ({"X-API-Key": ADMIN_KEY}, {}):
            card = httpx.get(f"{secret}/.well-known/agent-card.json", headers=headers)
            assert card.status_code == 404, card.text
            assert "secret" not in card.json()["error"]["message"].split("known:")[1]
        assert httpx.get(f"{secret}/.well-known/agent-card.json", headers={"X-API-Key": acme_key}).is_success
        denied = httpx.post(
            secret, json=rpc("SendMessage", send_params()), headers={**V1, "X-API-Key": ADMIN_KEY}
        )
        assert denied.status_code == 404 and denied.json()["error"]["code"] == -32050, denied.text
        assert "secret" not in denied.json()["error"]["message"].split("known:")[1]
        echoed = httpx.post(
            secret, json=rpc("SendMessage", send_params("ping")), headers={**V1, "X-API-Key": acme_key}
        )
        assert echoed.json()["result"]["message"]["parts"][0]["text"].endswith("ping"), echoed.text
        for key, sees in ((ADMIN_KEY, False), (acme_key, True), ("", False)):
            listed = httpx.get(f"{hub.url}/a2a/agents", headers={"X-API-Key": key} if key else {})
            assert ("acme.secret" in {a["id"] for a in listed.json()["agents"]}) is sees

        # MCP: the tools are the agents the caller may reach
        theirs_tools, answered = anyio.run(_mcp_tools, hub.url, acme_key)
        mine_tools, refused = anyio.run(_mcp_tools, hub.url, ADMIN_KEY)
        assert "ask_acme__secret" in theirs_tools and not answered.is_error
        assert "ask_acme__secret" not in mine_tools and refused.is_error and "ask_desk" in mine_tools

        # REST and WebSocket: another tenant's room looks absent
        assert other.call("GET", f"/rooms/{room['id']}").status_code == 404
        assert other.call("GET", f"/executions/{execution}").status_code == 404
        live = Live(hub.url, acme_key)
        live.send({"type": "subscribe", "rooms": [room["id"]], "cursor": 0})
        frame = live.recv()
        assert frame["type"] == "error" and frame["error"]["code"] == "NOT_FOUND"
        live.close()


async def _tasks_are_their_owners(agent_url: Any, execution: str, room: str, acme_key: str) -> None:
    """The default org's task and execution: its owner reads them, acme gets TaskNotFound / nothing."""
    with anyio.fail_after(60):
        async with sdk_client(agent_url("desk"), headers={"X-API-Key": ADMIN_KEY}) as mine:
            task = (await send(mine, user_message("a task of the default org")))[-1].task
            assert task.id
            assert (await mine.get_task(GetTaskRequest(id=task.id))).id == task.id
            assert [t.id for t in (await mine.list_tasks(ListTasksRequest())).tasks] == [task.id]
            assert (await mine.get_task(GetTaskRequest(id=execution))).id == execution
        for binding in ("JSONRPC", "HTTP+JSON"):
            async with sdk_client(
                agent_url("desk"), binding=binding, headers={"X-API-Key": acme_key}
            ) as theirs:
                for task_id in (task.id, execution):
                    with pytest.raises(TaskNotFoundError):
                        await theirs.get_task(GetTaskRequest(id=task_id))
                    with pytest.raises(TaskNotFoundError):
                        await theirs.cancel_task(CancelTaskRequest(id=task_id))
                assert list((await theirs.list_tasks(ListTasksRequest())).tasks) == []
        # a room of another tenant is no room to this caller: the contextId starts a plain conversation
        async with sdk_client(agent_url("greeter"), headers={"X-API-Key": acme_key}) as theirs:
            reply = (await send(theirs, user_message("hello?", context_id=room)))[-1]
        assert reply.message.parts[0].text == "Hello from greeter: hello?"


def test_a_personal_agent_is_its_registrants_alone(database_url: str) -> None:
    """`visibility: personal`: the person who registered it reaches it on every entry; the rest of
    their organization (an admin included) and other organizations see no such agent."""
    with serve_ranch(CONFIG, database_url, auth="keys") as hub:
        admin = Api(hub.url, ADMIN_KEY)
        owner_key = admin.post("/organizations", {"id": "globex"})["owner"]["api_key"]
        owner = Api(hub.url, owner_key)
        colleague_key = owner.post("/users", {"id": "ops", "name": "Ops", "role": "admin"})["api_key"]
        member_key = owner.post("/users", {"id": "mia", "name": "Mia"})["api_key"]
        owner.post("/agents", {"id": "mine", "kind": "echo", "visibility": "personal"})
        owner.post("/agents", {"id": "shared", "kind": "echo", "visibility": "org"})
        mine = hub.agent_url("globex.mine")

        def reaches(key: str) -> dict[str, bool]:
            headers = {"X-API-Key": key}
            listed = {a["id"] for a in httpx.get(f"{hub.url}/a2a/agents", headers=headers).json()["agents"]}
            api = {a["id"] for a in Api(hub.url, key).get("/agents")["items"]}
            called = httpx.post(mine, json=rpc("SendMessage", send_params("ping")), headers={**V1, **headers})
            card = httpx.get(f"{mine}/.well-known/agent-card.json", headers=headers)
            return {
                "a2a list": "globex.mine" in listed,
                "api list": "globex.mine" in api,
                "call": "result" in called.json(),
                "card": card.is_success,
                "org agent": "globex.shared" in api,
            }

        everything = dict.fromkeys(("a2a list", "api list", "call", "card", "org agent"), True)
        assert reaches(owner_key) == everything
        for key in (colleague_key, member_key):  # the same organization, not the registrant
            assert reaches(key) == {**dict.fromkeys(everything, False), "org agent": True}
        assert reaches(ADMIN_KEY) == dict.fromkeys(everything, False)  # another organization
        # nor can a colleague bring it into a room
        room = Api(hub.url, member_key).post("/rooms", {"title": "Mine?"})
        refused = Api(hub.url, member_key).call(
            "POST", f"/rooms/{room['id']}/participants", {"kind": "agent", "id": "mine"}
        )
        assert refused.status_code == 404 and refused.json()["error"]["field"] == "id", refused.text
