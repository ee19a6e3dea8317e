"""The routing adapters of examples/routing_adapters/, served as their users serve them: each example
run as its own process, in a venv with its framework from PyPI and without ranch (`make adk`,
`make agents`), its model (if any) the suite's scripted OpenAI-compatible server.

`team_with` is the ranch side: a team whose default agent `desk` is the adapter-served agent and
whose other member `billing` is a local `rules` agent, so a decision of the framework's agent is
seen in the team's trail.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from a2a.types import Task

from _support import TESTS
from _support.sdk import sdk_client, send, trail_of, user_message
from _support.servers import ServerProcess, free_port
from ranch.conform import Report, run

ROOT = TESTS.parent
EXAMPLES = ROOT / "examples" / "routing_adapters"
VENVS = {"adk": ROOT / ".venv-adk", "agents": ROOT / ".venv-agents"}
"""The make target that builds each venv, and where."""

BILLING = (
    "{id: billing, kind: rules, rules: [{reply: Billing fixed the invoice., route: user, reason: fixed}]}"
)
"""The local member the framework's agent may hand the turn to; it always answers the user."""


def python_of(target: str) -> Path:
    return VENVS[target] / "bin" / "python"


def needs_venv(target: str) -> pytest.MarkDecorator:
    """Skip, naming the make target that builds it, when the venv `make <target>` makes is missing."""
    ready = (VENVS[target] / ".installed").exists()
    return pytest.mark.skipif(not ready, reason=f"{VENVS[target].name} is missing: run `make {target}`")


@contextlib.contextmanager
def serve_example(python: Path, module: str, *args: str) -> Iterator[str]:
    """`python examples/routing_adapters/<module>.py --port P *args` on 127.0.0.1; yields its base URL
    once its card is served. Its environment names no proxy and turns the Agents SDK's tracing off,
    so nothing leaves the machine."""
    port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if key.lower() not in {"http_proxy", "https_proxy", "all_proxy"}
    }
    env |= {"OPENAI_API_KEY": "sk-local", "OPENAI_AGENTS_DISABLE_TRACING": "1", "PYTHONWARNINGS": "ignore"}
    command = [str(python), str(EXAMPLES / f"{module}.py"), "--port", str(port), *args]
    process = ServerProcess(
        command, port, health_path="/.well-known/agent-card.json", env=env, name=f"adapter-{module}"
    )
    with process:
        yield process.url


def team_with(desk_url: str) -> str:
    """A ranch config: team `desk` → the served agent (default), `billing` a local rules agent."""
    return f"""
agents:
  - {{id: desk, kind: remote, url: "{desk_url}", timeout: 20}}
  - {BILLING}
teams:
  - {{id: team, members: [desk, billing], default_agent: desk}}
"""


def ask_team(team_url: str, text: str) -> Task:
    """One user turn through the team, as any A2A caller sends it; the task it ends with."""

    async def call() -> Task:
        async with sdk_client(team_url) as client:
            (response,) = await send(client, user_message(text))
        return response.task

    return anyio.run(call)


def hops(task: Task) -> list[tuple[str, str]]:
    """(agent, recipient) for each hop of the turn."""
    return [(hop["agent"], hop["recipient"]) for hop in trail_of(task)]


def conform(url: str) -> Report:
    return anyio.run(lambda: run(url, answer_within=20))


def verdicts(report: Report) -> dict[str, Any]:
    return {outcome.id: outcome.passed for outcome in report.outcomes}


SCENARIOS = [
    "declares",
    "valid-recipient",
    "reads-peers",
    "back-to-sender",
    "hops-remaining",
    "not-negotiated",
]
