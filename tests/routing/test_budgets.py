"""Token budgets (docs/routing.md, "Budgets"): llm members report each answer's tokens from the
model's `usage`; any member may report them in the extension's response metadata (a remote
ranch's answer carries them over HTTP); a team's turn keeps a ledger (per hop and total) and,
with `budget: {tokens: N}`, starts no hop once N are spent."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
from a2a.types import Message, Part, Role, Task, TaskState
from google.protobuf.json_format import MessageToDict

from _support.fake_openai import FakeOpenAI, text
from _support.hubkit import serve_ranch
from _support.peers import running_peer
from _support.sdk import sdk_client, send
from ranch.wire.client_routing import URI

WRITER = "A short draft about moss."
CRITIC = "Good enough."


def config(base_url: str, budget: str = "") -> str:
    return f"""
agents:
  - {{id: writer, kind: llm, model: writer, base_url: "{base_url}", api_key: sk-test}}
  - {{id: critic, kind: llm, model: critic, base_url: "{base_url}", api_key: sk-test}}
teams:
  - id: desk
    members: [writer, critic]
    default_agent: writer
    routes: {{writer: critic, critic: user}}{budget}
"""


def ask(url: str) -> Task:
    async def go() -> Task:
        message = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text="write")])
        async with sdk_client(url) as client:
            (answer,) = await send(client, message)
        return answer.task

    return anyio.run(go)


def counted(fake: FakeOpenAI, model: str, answer: str) -> int:
    """The tokens the fake provider reported for `model`'s one request (a word is a token)."""
    (request,) = fake.requests_for(model)
    prompt = sum(len(str(m.get("content") or "").split()) for m in request["messages"])
    return prompt + len(answer.split())


def routing(task: Task) -> dict[str, Any]:
    return dict(MessageToDict(task.metadata)[URI])


def test_each_hop_reports_its_tokens_and_the_turn_keeps_the_ledger(
    fake: FakeOpenAI, base_url: str, tmp_path: Path
) -> None:
    fake.script("writer", text(WRITER))
    fake.script("critic", text(CRITIC))
    with serve_ranch(config(base_url), tmp_path / "a.db") as hub:
        task = ask(hub.agent_url("desk"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        data = routing(task)
        writer, critic = counted(fake, "writer", WRITER), counted(fake, "critic", CRITIC)
        assert [(hop["agent"], hop["tokens"]) for hop in data["trail"]] == [
            ("writer", writer),
            ("critic", critic),
        ]
        assert data["usage"] == {"totalTokens": writer + critic}
        assert all(r.get("stream_options") == {"include_usage": True} for r in fake.requests)

        # a team of another server: its whole turn's tokens arrive as one hop's, over HTTP
        outer = f"""
agents:
  - {{id: far, kind: remote, url: "{hub.agent_url("desk")}", timeout: 20}}
teams:
  - {{id: front, members: [far], default_agent: far}}
"""
        fake.script("writer", text(WRITER))
        fake.script("critic", text(CRITIC))
        with serve_ranch(outer, tmp_path / "b.db") as front:
            far = ask(front.agent_url("front"))
            hop = routing(far)["trail"][0]
            assert hop["tokens"] > 0 and routing(far)["usage"]["totalTokens"] == hop["tokens"]
            fake.script("writer", text(WRITER))
            fake.script("critic", text(CRITIC))
            command = [sys.executable, "-m", "ranch", "send", "desk", "write", "--url", hub.url]
            printed = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
            assert printed.returncode == 0, printed.stderr
            assert "tokens: " in printed.stdout and "writer" in printed.stdout.split("tokens: ")[1]


def test_a_spent_budget_starts_no_hop_and_fails_the_turn_with_the_ledger(
    fake: FakeOpenAI, base_url: str, tmp_path: Path
) -> None:
    fake.script("writer", text(WRITER))
    with serve_ranch(config(base_url, "\n    budget: {tokens: 5}"), tmp_path / "c.db") as hub:
        task = ask(hub.agent_url("desk"))
    assert task.status.state == TaskState.TASK_STATE_FAILED
    data = routing(task)
    spent = counted(fake, "writer", WRITER)
    assert data["error"]["type"] == "BudgetExceeded"
    said = "\n".join(part.text for part in task.status.message.parts)
    assert (
        f"team 'desk' spent {spent} tokens of its budget of 5; the turn stopped there (writer {spent})"
        in said
    )
    assert [hop["agent"] for hop in data["trail"]] == ["writer"] and data["usage"] == {"totalTokens": spent}
    assert fake.requests_for("critic") == []  # no hop started once the budget was spent


def test_an_a2a_sdk_peer_reports_its_tokens_in_the_extensions_usage_field(tmp_path: Path) -> None:
    usage = {"inputTokens": 30, "outputTokens": 12, "totalTokens": 42}
    with running_peer("router", route_to="user", reason="peer answered", usage=usage) as peer:
        config = f"""
agents:
  - {{id: sdk-peer, kind: remote, url: "{peer.url}"}}
teams:
  - {{id: outside, members: [sdk-peer], default_agent: sdk-peer, budget: {{tokens: 40}}}}
"""
        with serve_ranch(config, tmp_path / "p.db") as hub:
            first = ask(hub.agent_url("outside"))
    assert first.status.state == TaskState.TASK_STATE_COMPLETED  # the hop in flight is never cut short
    data = routing(first)
    assert data["trail"][0]["tokens"] == 42 and data["usage"] == {"totalTokens": 42}
