"""ranch's agents and teams as MCP tools, seen by the official `mcp` 2.x SDK client: over streamable
HTTP at /mcp on a served app (the stateless 2026-07-28 revision, and the 2025-11-25 one with its
`initialize` handshake), and over stdio from `ranch mcp`."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
import yaml
from mcp import StdioServerParameters, types
from mcp.client import Client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from _support.hubkit import ADMIN_KEY, Api, RunningRanch, serve_ranch
from _support.probes import SLEEPER
from ranch.cli.demo import DEMO_YAML

pytestmark = pytest.mark.anyio

TEAM_ROUTE = ["user", "triage", "researcher", "triage", "user"]
MODERN, HANDSHAKE = "2026-07-28", "2025-11-25"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRanch]:
    with serve_ranch(DEMO_YAML, tmp_path_factory.mktemp("mcp") / "t.db") as ranch:
        yield ranch


class Replicas(httpx2.AsyncBaseTransport):
    """Sends each request to the next of `urls` in turn (a load balancer with no stickiness at all),
    and keeps what each request was and which replica answered it."""

    def __init__(self, *urls: str) -> None:
        self.targets = [httpx2.URL(url) for url in urls]
        self.inner = httpx2.AsyncHTTPTransport()
        self.sent: list[tuple[int, str, httpx2.Headers]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        target = self.targets[len(self.sent) % len(self.targets)]
        request.url = request.url.copy_with(port=target.port)
        response = await self.inner.handle_async_request(request)
        method = json.loads(request.content).get("method", "") if request.content else request.method
        self.sent.append((target.port or 0, method, response.headers))
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def connected(
    url: str, mode: str, transport: httpx2.AsyncBaseTransport | None = None
) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(transport=transport, timeout=20) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, cache=None) as client,
    ):
        yield client


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return dict(result.structured_content)


def error_text(result: types.CallToolResult) -> str:
    assert result.is_error, result
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_client_of_either_revision_lists_agents_and_teams_and_calls_a_team(
    demo: RunningRanch, mode: str
) -> None:
    """`auto` discovers the server (2026-07-28, no handshake); `legacy` is a 2025-era client."""
    replicas = Replicas(demo.url)  # one replica: only to see every request and response
    with anyio.fail_after(20):
        async with connected(f"{demo.url}/mcp", mode, replicas) as client:
            listed = await client.list_tools()
            result = await client.call_tool("ask_helpdesk", {"message": "find papers on otters"})
            follow_up = await client.call_tool(
                "ask_helpdesk",
                {"message": "find papers on seals", "context_id": structured(result)["context_id"]},
            )
            agent = await client.call_tool("ask_triage", {"message": "find papers on otters"})
            protocol, info = client.protocol_version, client.server_info
            capabilities, instructions = client.server_capabilities, client.instructions
    assert protocol == (MODERN if mode == "auto" else HANDSHAKE)
    assert info is not None and info.name == "ranch"
    assert capabilities.tools is not None and instructions is not None and "ask_<id>" in instructions
    assert [method for _, method, _ in replicas.sent][0] == (
        "server/discover" if mode == "auto" else "initialize"
    )
    assert not [headers for _, _, headers in replicas.sent if "mcp-session-id" in headers]  # stateless
    assert {tool.name for tool in listed.tools} == {
        "ask_helpdesk", "ask_triage", "ask_researcher", "ask_writer", "ask_echo"
    }  # fmt: skip
    helpdesk = next(tool for tool in listed.tools if tool.name == "ask_helpdesk")
    assert helpdesk.input_schema["required"] == ["message"]
    assert helpdesk.output_schema is not None and "route" in helpdesk.output_schema["properties"]
    if mode == "auto":  # the 2026-07-28 cache hints; a tool list may differ per key: private
        assert (listed.ttl_ms, listed.cache_scope) == (5000, "private")
    assert listed.meta is not None and len(listed.meta["ranch/catalog"]) == 16
    answer = structured(result)
    assert answer["state"] == "completed"
    assert answer["route"] == TEAM_ROUTE
    assert answer["reply"].startswith("Here is what the team prepared.")
    assert [hop["agent"] for hop in answer["trail"]] == ["triage", "researcher", "triage"]
    text = result.content[0]
    assert isinstance(text, types.TextContent) and text.text.endswith("route: " + " -> ".join(TEAM_ROUTE))
    assert structured(follow_up)["context_id"] == answer["context_id"]
    assert structured(agent)["route"] == ["user", "triage", "researcher"]  # the agent's own decision


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_two_replicas_answer_alternate_requests_of_one_client(tmp_path: Path, mode: str) -> None:
    """No session lives in a replica: each request of one client goes to the other replica than the
    one before, and every one is answered (what any load balancer may do to a stateless client)."""
    with (
        serve_ranch(DEMO_YAML, tmp_path / "a.db") as first,
        serve_ranch(DEMO_YAML, tmp_path / "b.db") as second,
        anyio.fail_after(20),
    ):
        replicas = Replicas(first.url, second.url)
        async with connected(f"{first.url}/mcp", mode, replicas) as client:
            listed = await client.list_tools()
            asked = await client.call_tool("ask_helpdesk", {"message": "find papers on otters"})
            again = await client.call_tool("ask_echo", {"message": "hello"})
    assert "ask_helpdesk" in {tool.name for tool in listed.tools}
    assert structured(asked)["route"] == TEAM_ROUTE and structured(again)["reply"] == "hello"
    ports = [port for port, _, _ in replicas.sent]
    assert len(ports) >= 4 and len(set(ports)) == 2, replicas.sent


async def test_the_catalog_digest_of_a_tool_list_changes_when_an_agent_is_registered(tmp_path: Path) -> None:
    """A client that caches the list (2026-07-28 `ttlMs`) tells a changed catalog by its digest."""
    with serve_ranch(DEMO_YAML, tmp_path / "t.db") as ranch, anyio.fail_after(20):
        async with connected(f"{ranch.url}/mcp", "auto") as client:
            before = await client.list_tools()
            again = await client.list_tools()
            Api(ranch.url, ADMIN_KEY).post("/agents", {"id": "parrot", "kind": "echo"})
            after = await client.list_tools()
    assert before.meta is not None and again.meta is not None and after.meta is not None
    assert before.meta["ranch/catalog"] == again.meta["ranch/catalog"] != after.meta["ranch/catalog"]
    assert {tool.name for tool in after.tools} - {tool.name for tool in before.tools} == {"ask_parrot"}


async def test_bad_input_gets_an_error_naming_the_field(demo: RunningRanch) -> None:
    """Arguments are the tool's error (a model reads it and corrects the call); a malformed request
    envelope is the request's error (-32602)."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {
        "unknown tool": ("ask_nobody", {"message": "hi"}),
        "wrong type": ("ask_helpdesk", {"message": 5}),
        "missing": ("ask_helpdesk", {"context_id": "c"}),
        "extra": ("ask_helpdesk", {"message": "hi", "mood": "sunny"}),
        "control character": ("ask_helpdesk", {"message": "ring \u0007"}),
        "oversized": ("ask_helpdesk", {"message": "x" * 100_001}),
        "empty": ("ask_helpdesk", {"message": ""}),
        "long context id": ("ask_helpdesk", {"message": "hi", "context_id": "c" * 300}),
    }
    with anyio.fail_after(20):
        async with connected(f"{demo.url}/mcp", "auto") as client:
            errors = {what: error_text(await client.call_tool(*call)) for what, call in calls.items()}
    assert errors["unknown tool"].startswith("name: no tool 'ask_nobody'; the tools are ask_triage")
    assert errors["wrong type"] == "arguments.message: 5 is not of type 'string'"
    assert errors["missing"] == "arguments.message: is required"
    assert errors["extra"].startswith("arguments.mood: is not an argument of this tool")
    # the same limits as every A2A entry
    assert errors["control character"].startswith("arguments.message contains the control character U+0007")
    assert (
        errors["oversized"].startswith("arguments.message has 100")
        and "limit is 100000 bytes" in errors["oversized"]
    )
    assert errors["empty"] == "arguments.message is empty"
    assert errors["long context id"] == "arguments.context_id is 300 characters; the limit is 256"

    envelope = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    requests: dict[str, tuple[str | None, str, dict[str, Any]]] = {
        "no capabilities": (
            MODERN,
            "tools/list",
            {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}},
        ),
        "bad capabilities": (
            MODERN,
            "tools/list",
            {"_meta": {**envelope, "io.modelcontextprotocol/clientCapabilities": 5}},
        ),
        "arguments not an object": (
            MODERN,
            "tools/call",
            {"_meta": envelope, "name": "ask_echo", "arguments": "x"},
        ),
        "2025 _meta not an object": (None, "tools/list", {"_meta": "x"}),
        "2025 name not a string": (None, "tools/call", {"name": 5}),
    }
    async with httpx.AsyncClient(timeout=20) as http:
        refused = {what: await rpc_error(http, demo.url, *request) for what, request in requests.items()}
        bad_filter = await rpc_error(
            http, demo.url + "/mcp?skill=%20", MODERN, "tools/list", {"_meta": envelope}
        )
    assert all(error["code"] == -32602 for error in [*refused.values(), bad_filter]), refused
    messages = {what: error["message"] for what, error in refused.items()}
    assert messages["no capabilities"].startswith("params._meta is missing the required envelope key(s)")
    assert messages["bad capabilities"].startswith(
        'params._meta["io.modelcontextprotocol/clientCapabilities"]: Input should be a valid dictionary'
    )
    assert messages["arguments not an object"] == "params.arguments: Input should be a valid dictionary"
    assert messages["2025 _meta not an object"].startswith("params._meta: Input should be a valid dictionary")
    assert messages["2025 name not a string"] == "params.name: Input should be a valid string"
    assert bad_filter["message"].startswith("skill:"), bad_filter


async def rpc_error(
    http: httpx.AsyncClient, url: str, protocol: str | None, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    """The JSON-RPC error `url` answers a request with (as JSON, or as the SSE event of a 2025 one)."""
    headers = {"Accept": "application/json, text/event-stream"}
    if protocol is not None:
        headers |= {"Mcp-Protocol-Version": protocol, "Mcp-Method": method}
        if "name" in params:
            headers["Mcp-Name"] = str(params["name"])
    body = {"jsonrpc": "2.0", "id": 3, "method": method, "params": params}
    response = await http.post(url if "/mcp" in url else f"{url}/mcp", json=body, headers=headers)
    if response.headers["content-type"].startswith("text/event-stream"):
        data = next(line[5:] for line in response.text.splitlines() if line.startswith("data:"))
        error: dict[str, Any] = json.loads(data)["error"]
    else:
        assert response.status_code == 400, response.text
        error = response.json()["error"]
    return error


async def test_ranch_mcp_serves_the_same_tools_over_stdio_and_logs_scrubbed_json_lines_to_stderr(
    tmp_path: Path,
) -> None:
    """stdout is the protocol; the logs go to stderr as `ranch serve`'s do: JSON lines, scrubbed."""
    (tmp_path / "chatty.py").write_text(CHATTY)
    config = yaml.safe_load(DEMO_YAML)
    config["agents"].append({"id": "chatty", "kind": "python", "entry": "chatty:Chatty"})
    (tmp_path / "team.yaml").write_text(yaml.safe_dump(config))
    email, key = "ada.lovelace@example.org", "rk_Q2x-fW9_aZ3kLm0PqRsTuVwXyZ01-_3b"
    stderr = tmp_path / "stderr.log"
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "ranch", "mcp", "team.yaml"], cwd=tmp_path
    )
    with stderr.open("w") as errlog, anyio.fail_after(30):
        async with Client(stdio_client(params, errlog=errlog), cache=None) as client:
            listed = await client.list_tools()
            result = await client.call_tool("ask_helpdesk", {"message": "find papers on otters"})
            chatty = await client.call_tool("ask_chatty", {"message": f"mail {email} with key {key}"})
            protocol = client.protocol_version
    assert protocol == MODERN  # discovered, no handshake
    assert {"ask_helpdesk", "ask_chatty"} <= {tool.name for tool in listed.tools}
    assert structured(result)["route"] == TEAM_ROUTE
    assert email in structured(chatty)["reply"]  # the caller gets its own text back; only logs are scrubbed
    output = stderr.read_text()
    records = [json.loads(line) for line in output.splitlines() if line.strip()]
    logged = [record for record in records if record["logger"] == "chatty"]
    assert [record["message"] for record in logged] == ["asked: mail [email] with key [secret]"], output
    assert email not in output and key not in output


async def test_a_tool_call_streamed_as_sse_ends_with_the_authentication_error_when_its_key_is_revoked(
    tmp_path: Path,
) -> None:
    """/mcp is stateless, but a tool call answered as SSE stays open while the agent works: a key
    revoked meanwhile ends it with the authentication error, the last thing the client reads.

    (A 2025-era request: its answer is an SSE stream at once. The SDK answers a 2026-07-28 request
    with JSON when the tool ends within 15 s, as SSE after that: a key revoked meanwhile refuses it
    then, as `edge/ending.py` refuses a stream whose key ended while it opened.)"""
    with serve_ranch(SLEEPER, tmp_path / "t.db", auth="keys") as ranch:
        owner = Api(
            ranch.url, Api(ranch.url, ADMIN_KEY).post("/organizations", {"id": "acme"})["owner"]["api_key"]
        )
        created = owner.post("/keys", {})
        call = {"name": "ask_sleeper", "arguments": {"message": "hi"}}
        body = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": call}
        headers = {"Accept": "application/json, text/event-stream", "X-API-Key": created["api_key"]}
        events: list[tuple[str, dict[str, Any]]] = []
        with anyio.fail_after(20):
            async with (
                httpx.AsyncClient(timeout=20) as http,
                http.stream("POST", f"{ranch.url}/mcp", json=body, headers=headers) as response,
            ):
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/event-stream")
                owner.post(f"/keys/{created['key']['id']}/revoke", None, status=200)
                name = "message"
                async for line in response.aiter_lines():
                    if line.startswith("event:"):
                        name = line[6:].strip()
                    elif line.startswith("data:"):
                        events.append((name, json.loads(line[5:])))
    assert events, "the stream ended with nothing"
    name, last = events[-1]
    assert name == "message"  # what an MCP client reads
    assert last["id"] == 5 and "revoked" in last["error"]["message"], last
    assert all("result" not in data for _, data in events), events  # the answer never came


CHATTY = """
import logging

from ranch.agents.base import reply, text_of

class Chatty:
    def __init__(self, agent_id, **options):
        self.name = agent_id

    async def run(self, message, call):
        logging.getLogger("chatty").warning("asked: %s", text_of(message))
        yield reply(message, text_of(message))
"""
