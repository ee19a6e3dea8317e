"""llm agents that route with `route_to`, call MCP tools (stdio subprocess and streamable HTTP)
and remote A2A agents, all against the scripted OpenAI-compatible server."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a.types import Message, TaskState
from google.protobuf.json_format import MessageToDict

from _support import TESTS, mcp_tools
from _support.fake_openai import FakeOpenAI, Reply, route_enum, text, tool, tool_names
from _support.hubkit import serve_ranch
from _support.peers import running_peer
from _support.sdk import sdk_client, send, trail_of, user_message
from _support.servers import ServerThread
from ranch.agents.base import Call, text_of
from ranch.agents.fold import collect
from ranch.agents.llm import LlmAgent
from ranch.catalog.build import build_agent
from ranch.config import parse_config
from ranch.wire.client import ClientPool

pytestmark = pytest.mark.anyio

TOOLS_SCRIPT = TESTS / "_support" / "mcp_tools.py"


@pytest.fixture(scope="module")
def http_tools() -> Iterator[str]:
    """The test MCP server over streamable HTTP on 127.0.0.1; yields its endpoint URL."""
    with ServerThread(mcp_tools.http_app(), name="mcp-http") as server:
        yield f"{server.url}/mcp"


def notes(task_history: list[Message]) -> list[tuple[str, dict[str, Any]]]:
    """The tool_call / tool_result records in a task's history, in order."""
    found = []
    for message in task_history:
        kind = MessageToDict(message.metadata).get("ranch.message_type")
        if kind:
            found.append((kind, MessageToDict(message.parts[0].data)))
    return found


def route_to(recipient: str, reason: str, content: str = "") -> Reply:
    return tool("route_to", {"recipient": recipient, "reason": reason}, content=content)


async def test_a_team_of_llm_agents_routes_with_route_to(
    fake: FakeOpenAI, base_url: str, tmp_path: Path
) -> None:
    config = f"""
agents:
  - {{id: triage, kind: llm, model: triage, base_url: {base_url}, description: Sorts requests}}
  - {{id: researcher, kind: llm, model: researcher, base_url: {base_url}, description: Finds facts}}
  - {{id: writer, kind: llm, model: writer, base_url: {base_url}, description: Writes the answer}}
teams:
  - {{id: desk, members: [triage, researcher, writer], default_agent: triage}}
"""
    fake.script("triage", route_to("researcher", "needs facts"), text("Please find facts about otters."))
    fake.script("researcher", route_to("writer", "facts found", content="Otters hold hands when they sleep."))
    fake.script("writer", route_to("user", "done", content="Fun fact: otters hold hands while asleep."))
    with serve_ranch(config, tmp_path / "t.db") as ranch:
        async with sdk_client(ranch.agent_url("desk")) as client:
            task = (await send(client, user_message("tell me something about otters")))[0].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert text_of(task.status.message) == "Fun fact: otters hold hands while asleep."
    hops = [(hop["agent"], hop["recipient"], hop["reason"]) for hop in trail_of(task)]
    assert hops == [
        ("triage", "researcher", "needs facts"),
        ("researcher", "writer", "facts found"),
        ("writer", "user", "done"),
    ]
    first = fake.requests_for("triage")[0]
    assert route_enum(first) == ["researcher", "writer", "user", "sender"]
    assert "researcher (researcher): Finds facts" in first["messages"][0]["content"]
    assert route_enum(fake.requests_for("writer")[0]) == ["triage", "researcher", "user", "sender"]
    # route_to alone is answered at once; the model then writes its message for the researcher
    second = fake.requests_for("triage")[1]["messages"]
    assert second[-1] == {
        "role": "tool",
        "tool_call_id": "call_0_route_to",
        "content": "Your reply will go to 'researcher'.",
    }
    researcher_saw = fake.requests_for("researcher")[0]["messages"][-1]["content"]
    assert "Please find facts about otters." in researcher_saw
    assert "tell me something about otters" in researcher_saw  # the team's context part


async def test_a_model_that_answers_without_route_to_makes_no_decision(
    fake: FakeOpenAI, base_url: str
) -> None:
    config = f"""
agents:
  - {{id: solo, kind: llm, model: solo, base_url: {base_url}}}
  - {{id: other, kind: echo}}
teams:
  - {{id: duo, members: [solo, other], default_agent: solo}}
"""
    fake.script("solo", text("I can answer that myself."))
    registry_agent = build_agent(parse_config(config).agents[0], ClientPool())
    assert isinstance(registry_agent, LlmAgent)
    async with registry_agent:
        outcome = await collect(registry_agent, user_message("hi"), Call())
    assert outcome.decision is None and outcome.text == "I can answer that myself."
    assert "tools" not in fake.requests_for("solo")[0]  # no peers were sent: no route_to offered


async def test_tools_of_an_mcp_server_started_as_a_subprocess(
    fake: FakeOpenAI, base_url: str, tmp_path: Path
) -> None:
    config = f"""
agents:
  - id: calc
    kind: llm
    model: calc
    base_url: {base_url}
    mcp_servers:
      - {{name: local, command: {sys.executable}, args: ["{TOOLS_SCRIPT}"]}}
"""
    fake.script("calc", tool("add", {"a": 2, "b": 3}), tool("whoami", {}), text("2 + 3 = 5"))
    with serve_ranch(config, tmp_path / "t.db") as ranch:
        async with sdk_client(ranch.agent_url("calc")) as client:
            task = (await send(client, user_message("what is 2 + 3?")))[0].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, text_of(task.status.message)
    assert text_of(task.status.message) == "2 + 3 = 5"
    recorded = notes(list(task.history))
    assert recorded[:2] == [
        ("tool_call", {"call_id": "call_0_add", "name": "add", "arguments": {"a": 2, "b": 3}}),
        ("tool_result", {"call_id": "call_0_add", "name": "add", "result": "5", "is_error": False}),
    ]
    assert recorded[3][1]["result"].startswith("pid ") and recorded[3][1]["result"] != f"pid {os.getpid()}"
    requests = fake.requests_for("calc")
    assert set(tool_names(requests[0])) == {"add", "shout", "whoami"}
    assert requests[1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_0_add", "content": "5"}


async def test_an_invalid_tool_call_is_caught_and_corrected_next_round(
    fake: FakeOpenAI, base_url: str, http_tools: str, tmp_path: Path
) -> None:
    mcp_tools.CALLS.clear()
    config = f"""
agents:
  - id: calc
    kind: llm
    model: calc
    base_url: {base_url}
    mcp_servers:
      - {{name: remote, url: "{http_tools}"}}
"""
    fake.script(
        "calc",
        tool("add", {"a": "two", "b": 3}),
        tool("add", {"a": 2, "b": 3}),
        text("The sum is 5."),
    )
    with serve_ranch(config, tmp_path / "t.db") as ranch:
        async with sdk_client(ranch.agent_url("calc")) as client:
            task = (await send(client, user_message("add two and three")))[0].task
    assert text_of(task.status.message) == "The sum is 5."
    assert mcp_tools.CALLS == [("add", {"a": 2, "b": 3})]  # the invalid call never reached the server
    requests = fake.requests_for("calc")
    rejected = requests[1]["messages"][-1]
    assert rejected["role"] == "tool"
    assert rejected["content"] == "invalid arguments for tool 'add': 'two' is not of type 'integer' (at 'a')"
    assert requests[2]["messages"][-1]["content"] == "5"
    results = [data for kind, data in notes(list(task.history)) if kind == "tool_result"]
    assert [r["is_error"] for r in results] == [True, False]


async def test_an_unreachable_mcp_server_leaves_the_model_without_its_tools(
    fake: FakeOpenAI, base_url: str
) -> None:
    config = f"""
agents:
  - id: calc
    kind: llm
    model: calc
    base_url: {base_url}
    mcp_servers:
      - {{name: gone, command: {sys.executable}, args: ["-c", "raise SystemExit(3)"], timeout: 5}}
"""
    fake.script("calc", text("I have no tools, but hello."))
    agent = build_agent(parse_config(config).agents[0], ClientPool())
    assert isinstance(agent, LlmAgent)
    async with agent:
        outcome = await collect(agent, user_message("hi"), Call())
    assert outcome.text == "I have no tools, but hello."
    assert "tools" not in fake.requests_for("calc")[0]


async def test_call_remote_agent_reaches_allowed_agents_only(fake: FakeOpenAI, base_url: str) -> None:
    with running_peer("plain") as peer:
        config = f"""
agents:
  - id: asker
    kind: llm
    model: asker
    base_url: {base_url}
    remote_agents:
      - {{name: helper, url: "{peer.url}", description: echoes what it gets}}
"""
        fake.script(
            "asker",
            tool("call_remote_agent", {"agent": "helper", "message": "ping"}),
            tool("call_remote_agent", {"agent": "http://127.0.0.1:9/elsewhere", "message": "ping"}),
            text("The helper said: plain saw: ping"),
        )
        agent = build_agent(parse_config(config).agents[0], ClientPool())
        assert isinstance(agent, LlmAgent)
        assert agent.allowed_remote_urls == frozenset({peer.url})
        async with agent:
            outcome = await collect(agent, user_message("ask the helper"), Call())
            agent.allowed_remote_urls = frozenset()  # the hub narrows it: the tool disappears
            fake.script("asker", text("nothing to call"))
            await collect(agent, user_message("again"), Call())
    assert outcome.text == "The helper said: plain saw: ping"
    requests = fake.requests_for("asker")
    assert "helper = " + peer.url in requests[0]["tools"][0]["function"]["description"]
    assert requests[1]["messages"][-1]["content"] == "plain saw: ping"
    assert requests[2]["messages"][-1]["content"] == (
        "agent 'http://127.0.0.1:9/elsewhere' is not on this agent's allow-list of remote agents"
    )
    assert "tools" not in requests[3]
