"""ranch's agents and teams as MCP tools, seen by the official `mcp` SDK client:
over streamable HTTP at /mcp on a served app, and over stdio from `ranch mcp`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from _support.hubkit import ADMIN_KEY, Api, serve_ranch
from _support.probes import SLEEPER
from ranch.cli.demo import DEMO_YAML

pytestmark = pytest.mark.anyio

TEAM_ROUTE = ["user", "triage", "researcher", "triage", "user"]


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.isError, result.content
    assert result.structuredContent is not None
    return result.structuredContent


async def test_the_mcp_client_lists_agents_and_teams_and_calls_a_team_over_http(tmp_path: Path) -> None:
    with serve_ranch(DEMO_YAML, tmp_path / "t.db") as ranch:
        with anyio.fail_after(20):
            async with (
                streamable_http_client(f"{ranch.url}/mcp") as (read, write, _),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                listed = await session.list_tools()
                result = await session.call_tool("ask_helpdesk", {"message": "find papers on otters"})
                follow_up = await session.call_tool(
                    "ask_helpdesk",
                    {"message": "find papers on seals", "context_id": structured(result)["context_id"]},
                )
                unknown = await session.call_tool("ask_nobody", {"message": "hi"})
                bell = await session.call_tool("ask_helpdesk", {"message": "ring \u0007"})
                huge = await session.call_tool("ask_helpdesk", {"message": "x" * 100_001})
                empty = await session.call_tool("ask_helpdesk", {"message": ""})
    names = {tool.name for tool in listed.tools}
    assert {"ask_helpdesk", "ask_triage", "ask_researcher", "ask_writer"} <= names
    helpdesk = next(tool for tool in listed.tools if tool.name == "ask_helpdesk")
    assert helpdesk.inputSchema["required"] == ["message"]
    answer = structured(result)
    assert answer["state"] == "completed"
    assert answer["route"] == TEAM_ROUTE
    assert answer["reply"].startswith("Here is what the team prepared.")
    assert [hop["agent"] for hop in answer["trail"]] == ["triage", "researcher", "triage"]
    text = result.content[0]
    assert isinstance(text, types.TextContent) and text.text.endswith("route: " + " -> ".join(TEAM_ROUTE))
    assert structured(follow_up)["context_id"] == answer["context_id"]
    assert unknown.isError
    # the same limits as every A2A entry, reported as the tool's error
    assert bell.isError and "control character U+0007" in str(bell.content[0])
    assert huge.isError and "the limit is 100000 bytes" in str(huge.content[0])
    assert empty.isError and "is empty" in str(empty.content[0])


async def test_ranch_mcp_serves_the_same_tools_over_stdio(tmp_path: Path) -> None:
    config = tmp_path / "team.yaml"
    config.write_text(DEMO_YAML)
    params = StdioServerParameters(command=sys.executable, args=["-m", "ranch", "mcp", str(config)])
    with anyio.fail_after(30):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            result = await session.call_tool("ask_helpdesk", {"message": "find papers on otters"})
            agent = await session.call_tool("ask_triage", {"message": "find papers on otters"})
    assert "ask_helpdesk" in {tool.name for tool in listed.tools}
    assert structured(result)["route"] == TEAM_ROUTE
    single = structured(agent)
    assert single["route"] == ["user", "triage", "researcher"]  # the agent's own decision
    assert single["reply"] == "Routing to the researcher: find papers on otters"


async def test_ranch_mcp_logs_scrubbed_json_lines_to_stderr(tmp_path: Path) -> None:
    """stdout is the protocol; the logs go to stderr as `ranch serve`'s do: JSON lines, scrubbed."""
    (tmp_path / "chatty.py").write_text(CHATTY)
    config = tmp_path / "chatty.yaml"
    config.write_text("agents:\n  - {id: chatty, kind: python, entry: 'chatty:Chatty'}\n")
    email, key = "ada.lovelace@example.org", "rk_Q2x-fW9_aZ3kLm0PqRsTuVwXyZ01-_3b"
    stderr = tmp_path / "stderr.log"
    with stderr.open("w") as errlog, anyio.fail_after(30):
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "ranch", "mcp", str(config)], cwd=tmp_path
        )
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool("ask_chatty", {"message": f"mail {email} with key {key}"})
    assert email in structured(result)["reply"]  # the caller gets its own text back; only logs are scrubbed
    output = stderr.read_text()
    records = [json.loads(line) for line in output.splitlines() if line.strip()]
    logged = [record for record in records if record["logger"] == "chatty"]
    assert [record["message"] for record in logged] == ["asked: mail [email] with key [secret]"], output
    assert email not in output and key not in output


async def test_a_tool_call_streamed_as_sse_ends_with_the_authentication_error_when_its_key_is_revoked(
    tmp_path: Path,
) -> None:
    """/mcp is stateless, but a tool call answered as SSE stays open while the agent works: a key
    revoked meanwhile ends it with the authentication error, the last thing the client reads."""
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
