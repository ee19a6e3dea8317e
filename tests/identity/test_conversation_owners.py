"""A contextId is chosen by the client and is no secret: conversations belong to (owner, contextId).

Two organizations on one `--auth keys` server use the same contextIds. Neither sees the other's
words (through a member that echoes everything it is shown), answers the other's waiting member,
or continues the other's remote task; each one's own follow-ups still work.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from _support.hubkit import ADMIN_KEY, Api, RunningRanch, reply_text, send_text, serve_ranch
from _support.peers import RunningPeer, running_peer

SECRET = "my password is hunter2 and card 4111 1111 1111 1111"
V1 = {"A2A-Version": "1.0", "Content-Type": "application/json"}


def config(echo_url: str, asker_url: str) -> str:
    return f"""
agents:
  - id: front
    kind: rules
    rules:
      - {{match: "(?i)route-to-peer", reply: "forwarding: {{text}}", route: peer, reason: asked}}
      - {{match: "(?i)ask-me", reply: "asking", route: asker, reason: asked}}
      - {{reply: "noted: {{text}}", route: user}}
  - {{id: peer, kind: remote, url: "{echo_url}", timeout: 10}}
  - {{id: asker, kind: remote, url: "{asker_url}", timeout: 10}}
teams:
  - {{id: desk, members: [front, peer, asker], default_agent: front, routes: {{peer: user, asker: user}}}}
"""


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[tuple[RunningRanch, RunningPeer, RunningPeer]]:
    with running_peer("echoall") as echo, running_peer("asker") as asker:
        database = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
        with serve_ranch(config(echo.url, asker.url), database, auth="keys") as served:
            yield served, echo, asker


def org_key(base_url: str, org: str) -> str:
    created = Api(base_url, ADMIN_KEY).post("/organizations", {"id": org})
    return str(created["owner"]["api_key"])


def send(url: str, key: str, text: str, context_id: str, task_id: str = "") -> dict[str, Any]:
    return send_text(url, text, context_id, task_id=task_id, key=key)


def state(task: dict[str, Any]) -> str:
    return str(task["status"]["state"]).removeprefix("TASK_STATE_")


def test_another_owner_never_sees_a_conversation_on_the_same_context_id(
    hub: tuple[RunningRanch, RunningPeer, RunningPeer],
) -> None:
    served, echo, _ = hub
    acme, beta = org_key(served.url, "acme"), org_key(served.url, "beta")
    desk = served.agent_url("desk")

    assert state(send(desk, acme, SECRET, "ctx-shared")) == "COMPLETED"
    theirs = send(desk, beta, "route-to-peer what do you know?", "ctx-shared")
    assert state(theirs) == "COMPLETED", theirs
    assert reply_text(theirs).startswith("ECHOALL:")  # the peer echoed all it was shown ...
    assert "hunter2" not in json.dumps(theirs)  # ... and no secret (ids are random hex: match
    assert "4111 1111" not in json.dumps(theirs)  # the card's spaced groups, never a bare "4111")
    assert all("hunter2" not in m.text for m in echo.recorder.messages)

    # the same contextId over /mcp, as the other organization: no secret either
    answer = anyio.run(_ask_over_mcp, served.url, beta, "route-to-peer and now?", "ctx-shared")
    assert answer.startswith("ECHOALL:") and "hunter2" not in answer

    # the owner's own follow-up still continues its conversation
    mine = send(desk, acme, "route-to-peer what did I say?", "ctx-shared")
    assert "user: " + SECRET in reply_text(mine)


def test_another_owner_cannot_answer_a_member_waiting_on_the_first(
    hub: tuple[RunningRanch, RunningPeer, RunningPeer],
) -> None:
    served, _, asker = hub
    acme, beta = org_key(served.url, "acme"), org_key(served.url, "beta")
    desk = served.agent_url("desk")

    asked = send(desk, acme, "ask-me", "ctx-wait")
    assert state(asked) == "INPUT_REQUIRED" and reply_text(asked) == "What is your name?"
    intruder = send(desk, beta, "Mallory", "ctx-wait")  # beta's first turn here: the default agent
    assert state(intruder) == "COMPLETED" and reply_text(intruder) == "noted: Mallory"
    assert len(asker.recorder.messages) == 1  # nothing of beta's reached the waiting member

    answered = send(desk, acme, "Alice", "ctx-wait")
    assert state(answered) == "COMPLETED" and reply_text(answered) == "Hello, Alice!"
    first, second = asker.recorder.wait_for_messages(2)
    assert second.task_id == first.task_id  # acme's answer continued its own remote task


def test_another_owner_cannot_continue_a_remote_task(
    hub: tuple[RunningRanch, RunningPeer, RunningPeer],
) -> None:
    served, _, asker = hub
    acme, beta = org_key(served.url, "acme"), org_key(served.url, "beta")
    url = served.agent_url("asker")

    asked = send(url, acme, "hi", "ctx-remote")
    assert state(asked) == "INPUT_REQUIRED"
    intruder = send(url, beta, "Mallory", "ctx-remote")
    assert state(intruder) == "INPUT_REQUIRED" and reply_text(intruder) == "What is your name?"
    first, second = asker.recorder.wait_for_messages(2)
    assert second.task_id == "" or second.task_id != first.task_id  # a remote task of its own

    answered = send(url, acme, "Alice", "ctx-remote", task_id=asked["id"])
    assert state(answered) == "COMPLETED" and reply_text(answered) == "Hello, Alice!"
    assert asker.recorder.wait_for_messages(3)[2].task_id == first.task_id


async def _ask_over_mcp(base_url: str, key: str, text: str, context_id: str) -> str:
    with anyio.fail_after(60):
        async with (
            httpx2.AsyncClient(headers={"X-API-Key": key}, timeout=30) as http,
            Client(streamable_http_client(f"{base_url}/mcp", http_client=http), cache=None) as client,
        ):
            result = await client.call_tool("ask_desk", {"message": text, "context_id": context_id})
    assert not result.is_error, result
    structured = result.structured_content or {}
    return str(structured["reply"])
