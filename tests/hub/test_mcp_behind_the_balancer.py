"""/mcp behind `make cluster`'s HAProxy: two replicas answer alternate requests of one MCP client.

The balancer sends each request to the next replica (`balance roundrobin`, no stickiness): a
client of either revision (2026-07-28, and 2025-11-25 with its `initialize` handshake) lists and
calls ranch's tools through it, and each replica's metrics show it answered some of them.
PostgreSQL, Redis and HAProxy are needed; without them this test fails, saying so.
"""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import httpx
import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from _support.cluster import running_cluster
from ranch.cli.demo import DEMO_YAML

MCP_REQUESTS = re.compile(r'^ranch_requests_total\{[^}]*entry="mcp"[^}]*\} (\d+)', re.MULTILINE)


def answered_over_mcp(replica_url: str) -> int:
    metrics = httpx.get(f"{replica_url}/metrics", timeout=10).text
    return sum(int(count) for count in MCP_REQUESTS.findall(metrics))


async def use(url: str, mode: str) -> tuple[str, set[str], dict[str, object]]:
    async with (
        httpx2.AsyncClient(timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, cache=None) as client,
    ):
        listed = await client.list_tools()
        asked = await client.call_tool("ask_helpdesk", {"message": "find papers on otters"})
        again = await client.call_tool("ask_echo", {"message": "hello"})
        assert not asked.is_error and not again.is_error, (asked, again)
        return (
            client.protocol_version,
            {tool.name for tool in listed.tools},
            dict(asked.structured_content or {}),
        )


def test_two_replicas_behind_the_balancer_answer_one_mcp_client(postgres_url: str, tmp_path: Path) -> None:
    with running_cluster(
        DEMO_YAML, postgres_url, tmp_path / "cluster", replicas=2, serve=["--metrics"]
    ) as cluster:
        before = [answered_over_mcp(replica.url) for replica in cluster.replicas]
        modern = anyio.run(use, f"{cluster.url}/mcp", "auto")
        handshake = anyio.run(use, f"{cluster.url}/mcp", "legacy")
        after = [answered_over_mcp(replica.url) for replica in cluster.replicas]
    for _, names, answer in (modern, handshake):
        assert "ask_helpdesk" in names
        assert answer["route"] == ["user", "triage", "researcher", "triage", "user"]
    assert (modern[0], handshake[0]) == ("2026-07-28", "2025-11-25")
    answered = [late - early for early, late in zip(before, after, strict=True)]
    # 2026-07-28: discover, list, 2 calls; 2025: initialize, initialized, list, 2 calls: every
    # other one goes to each replica
    # (a replica HAProxy took out of service, "is DOWN", answered none while it was out)
    checks = (cluster.logs / "haproxy.log").read_text(errors="replace")[-3000:]
    assert sum(answered) >= 9 and min(answered) >= 3, (answered, checks)
