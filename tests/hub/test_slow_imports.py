"""Dependencies that take about a second to import (the MCP SDK, the openai client) are loaded on
first use, off the event loop (ranch.utils.imports): meanwhile the server goes on answering, a load
balancer's health checks included. Loaded on the loop, they held every request up for that second,
and HAProxy (a check every 500 ms, out of service after two missed) took the replica out.

Each test runs `ranch serve` in a fresh process, where nothing has loaded them yet, and counts the
health checks answered while the first use is under way."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import anyio
import httpx
import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from _support.servers import ranch_serve_process
from ranch.cli.demo import DEMO_YAML

pytestmark = pytest.mark.anyio

ADMIN_KEY = "rk_admin_slow_imports_0123456789"
ANSWERED_AT_LEAST = 50
"""Measured here, alone and beside four busy processes on two cores: 121-257 checks answered during
the first MCP call and 482-537 during the llm agent's registration with the modules loaded in a
thread; 6-12 and 8-19 when they loaded on the event loop (the busier the host, the longer the load)."""
T = TypeVar("T")


async def checks_answered_during(url: str, work: Callable[[], Awaitable[T]]) -> tuple[int, T]:
    """How many /healthz requests, sent one after the other, were answered while `work` ran."""
    answered = 0
    done = anyio.Event()
    result: list[T] = []

    async def check_health() -> None:
        nonlocal answered
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            while not done.is_set():
                assert (await http.get("/healthz")).status_code == 200
                answered += 1

    async def run() -> None:
        result.append(await work())
        done.set()

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            group.start_soon(check_health)
            group.start_soon(run)
    return answered, result[0]


async def test_the_first_mcp_call_leaves_the_server_answering(tmp_path: Path) -> None:
    async def list_tools() -> set[str]:
        async with (
            httpx2.AsyncClient(timeout=30) as http,
            Client(streamable_http_client(f"{server.url}/mcp", http_client=http), cache=None) as client,
        ):
            return {tool.name for tool in (await client.list_tools()).tools}

    with ranch_serve_process(tmp_path, DEMO_YAML, admin_key=ADMIN_KEY) as server:
        answered, tools = await checks_answered_during(server.url, list_tools)
    assert "ask_helpdesk" in tools
    assert answered >= ANSWERED_AT_LEAST, answered


async def test_registering_the_first_llm_agent_leaves_the_server_answering(tmp_path: Path) -> None:
    """An llm agent registered over REST is built at once (the openai client is loaded for it)."""
    body = {"id": "scribe", "kind": "llm", "model": "m", "base_url": "http://127.0.0.1:9/v1"}

    async def register() -> httpx.Response:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            return await http.post("/api/v1/agents", json=body, headers={"X-API-Key": ADMIN_KEY})

    with ranch_serve_process(tmp_path, DEMO_YAML, admin_key=ADMIN_KEY) as server:
        answered, registered = await checks_answered_during(server.url, register)
    assert registered.status_code == 201, registered.text
    assert answered >= ANSWERED_AT_LEAST, answered
