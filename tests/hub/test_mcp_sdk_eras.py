"""MCP across SDK generations: an mcp 1.x client (a 2025-era client, in the venv of `make mcp1`)
uses ranch's /mcp, and ranch's MCP client (llm agents' `mcp_servers`) uses servers written with mcp
2.x (2026-07-28, stateless) and with mcp 1.x (the 2025 `initialize` handshake), over stdio and HTTP."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from a2a.types import TaskState
from google.protobuf.json_format import MessageToDict

from _support import TESTS, mcp_tools
from _support.fake_openai import FakeOpenAI, text, tool
from _support.hubkit import serve_ranch, wait_until
from _support.sdk import sdk_client, send, user_message
from _support.servers import ServerThread, free_port
from ranch.agents.base import text_of
from ranch.agents.llm.mcp import McpServer
from ranch.cli.demo import DEMO_YAML
from ranch.config import HttpMcpServerConfig, StdioMcpServerConfig

pytestmark = pytest.mark.anyio

MCP1_PYTHON = TESTS.parent / ".venv-mcp1" / "bin" / "python"
V1_CLIENT = TESTS / "hub" / "mcp1" / "client.py"
TOOLS_SCRIPT = TESTS / "_support" / "mcp_tools.py"
MODERN, HANDSHAKE = "2026-07-28", "2025-11-25"


def mcp1() -> Path:
    if not MCP1_PYTHON.exists():
        pytest.fail(f"this test needs the mcp 1.x SDK in {MCP1_PYTHON.parent.parent}: run `make mcp1`")
    return MCP1_PYTHON


def answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.fixture(scope="module")
def tools_over_http() -> Iterator[dict[str, str]]:
    """The test tools over streamable HTTP: written with mcp 2.x (in this process, stateless) and with
    1.x (a process of the mcp1 venv, a session per client); yields their endpoint URLs by SDK."""
    port = free_port()
    v1 = subprocess.Popen([str(mcp1()), str(TOOLS_SCRIPT), "http", str(port)])
    try:
        with ServerThread(mcp_tools.http_app(), name="mcp-http") as v2:
            wait_until(lambda: answers(port) or v1.poll() is not None, what="the mcp 1.x server")
            assert v1.poll() is None, "the mcp 1.x server exited"
            yield {"1": f"http://127.0.0.1:{port}/mcp", "2": f"{v2.url}/mcp"}
    finally:
        v1.terminate()
        v1.wait(timeout=10)


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_an_mcp_1x_client_lists_and_calls_ranch_tools(tmp_path: Path, transport: str) -> None:
    """The 1.x client opens with `initialize`; over HTTP ranch keeps no session for it and answers
    each of its requests alone."""
    command = [str(mcp1()), str(V1_CLIENT)]
    if transport == "http":
        with serve_ranch(DEMO_YAML, tmp_path / "t.db") as ranch:
            done = subprocess.run([*command, f"{ranch.url}/mcp"], capture_output=True, text=True, timeout=60)
    else:  # `ranch mcp` with no config: the demo team
        command += [sys.executable, "-m", "ranch", "mcp"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["protocol"] == HANDSHAKE and seen["server"] == "ranch"
    assert seen["session_id"] is None  # stateless: no Mcp-Session-Id
    assert seen["tools"] == ["ask_echo", "ask_helpdesk", "ask_researcher", "ask_triage", "ask_writer"]
    assert seen["schema"]["required"] == ["message"] and seen["schema"]["additionalProperties"] is False
    assert seen["answer"]["route"] == ["user", "triage", "researcher", "triage", "user"]
    assert seen["again"]["context_id"] == seen["answer"]["context_id"]
    assert seen["unknown"]["is_error"] and seen["unknown"]["text"].startswith("name: no tool 'ask_nobody'")


@pytest.mark.parametrize(("sdk", "transport"), [("2", "stdio"), ("2", "http"), ("1", "stdio"), ("1", "http")])
async def test_the_mcp_client_uses_servers_of_both_sdk_generations(
    sdk: str, transport: str, tools_over_http: dict[str, str]
) -> None:
    python = sys.executable if sdk == "2" else str(mcp1())
    config = (
        StdioMcpServerConfig(name="calc", command=python, args=[str(TOOLS_SCRIPT)], timeout=20)
        if transport == "stdio"
        else HttpMcpServerConfig(name="calc", url=tools_over_http[sdk], timeout=20)
    )
    async with McpServer(config) as server:
        names = {tool.name for tool in await server.list_tools()}
        added = await server.call_tool("add", {"a": 2, "b": 3})
        who = await server.call_tool("whoami", {})
        wrong = await server.call_tool("add", {"a": "two", "b": 3})
        protocol = server.protocol_version
    assert names == {"add", "shout", "whoami"}
    assert protocol == (MODERN if sdk == "2" else HANDSHAKE)
    assert (added.text, added.is_error, added.structured) == ("5", False, {"result": 5})
    assert f" mcp {sdk}." in who.text
    assert (
        wrong.is_error
        and wrong.text == "invalid arguments for tool 'add': 'two' is not of type 'integer' (at 'a')"
    )


async def test_an_llm_agent_keeps_a_structured_tool_result_as_a_data_part(
    fake: FakeOpenAI, base_url: str, tools_over_http: dict[str, str], tmp_path: Path
) -> None:
    config = f"""
agents:
  - id: calc
    kind: llm
    model: calc
    base_url: {base_url}
    mcp_servers:
      - {{name: old, url: "{tools_over_http["1"]}"}}
"""
    fake.script("calc", tool("add", {"a": 2, "b": 3}), text("2 + 3 = 5"))
    with serve_ranch(config, tmp_path / "t.db") as ranch:
        async with sdk_client(ranch.agent_url("calc")) as client:
            task = (await send(client, user_message("what is 2 + 3?")))[0].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, text_of(task.status.message)
    results = [
        m for m in task.history if MessageToDict(m.metadata).get("ranch.message_type") == "tool_result"
    ]
    assert len(results) == 1
    parts = [MessageToDict(part.data) for part in results[0].parts]
    assert parts == [
        {"call_id": "call_0_add", "name": "add", "result": "5", "is_error": False},
        {"result": 5},  # the tool's structured_content, as data
    ]
