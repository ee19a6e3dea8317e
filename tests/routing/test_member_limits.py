"""Members that misbehave on size and time: a card endpoint that hangs, cards and replies too large.

Real servers on 127.0.0.1: ranch and the misbehaving peer (tests/_support/faulty.py). Deadlines here are
generous: they turn a hang into a failure, they do not measure speed.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from _support.faulty import Faulty, running_faulty
from _support.hubkit import serve_ranch

DEADLINE = 30.0
"""Seconds a request may take here; a card endpoint that hangs used to stall a turn for 60."""


@pytest.fixture(scope="module")
def faulty() -> Iterator[Faulty]:
    with running_faulty() as peer:
        yield peer


def send(agent_url: str, text: str = "hi") -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": text}]}
        },
    }
    answer: dict[str, Any] = httpx.post(
        agent_url, json=body, headers={"A2A-Version": "1.0"}, timeout=DEADLINE
    ).json()
    return answer


def status(answer: dict[str, Any]) -> tuple[str, str]:
    """(state, text) of the task a SendMessage answered with; a direct reply counts as COMPLETED."""
    if "message" in answer["result"]:
        return "TASK_STATE_COMPLETED", " ".join(
            p.get("text", "") for p in answer["result"]["message"]["parts"]
        )
    task = answer["result"]["task"]
    message = task["status"].get("message", {"parts": []})
    return task["status"]["state"], " ".join(p.get("text", "") for p in message["parts"])


def test_a_hanging_card_endpoint_does_not_stall_its_team(tmp_path: Path, faulty: Faulty) -> None:
    config = f"""
agents:
  - {{id: ok, kind: remote, url: "{faulty.url}/ok", timeout: 5}}
  - {{id: slowcard, kind: remote, url: "{faulty.url}/slowcard", timeout: 4, description: from the config}}
teams:
  - {{id: mixed, members: [ok, slowcard], default_agent: ok}}
"""
    with serve_ranch(config, tmp_path / "t.db", card_timeout=1.0) as ranch:
        for _turn in range(2):  # the second turn does not wait for the dead card again
            state, text = status(send(ranch.agent_url("mixed")))
            assert (state, text) == ("TASK_STATE_COMPLETED", "ok from faulty")
        listed = httpx.get(f"{ranch.url}/a2a/agents", timeout=DEADLINE).json()["agents"]
        offered = {entry["id"]: entry["description"] for entry in listed}
        assert offered["slowcard"] == "from the config"  # offered from its config meanwhile
        card = httpx.get(f"{ranch.agent_url('mixed')}/.well-known/agent-card.json", timeout=DEADLINE)
        assert card.status_code == 200
        state, text = status(send(ranch.agent_url("slowcard")))
    assert state == "TASK_STATE_FAILED" and "agent 'slowcard'" in text and "card_timeout" in text, text
    assert faulty.card_requests["slowcard"] <= 2  # the failure is remembered, not retried each call


@pytest.mark.parametrize("mode", ["cardkb600", "hugecard"])
def test_an_oversized_card_is_refused_naming_the_limit(tmp_path: Path, faulty: Faulty, mode: str) -> None:
    config = f'agents:\n  - {{id: big, kind: remote, url: "{faulty.url}/{mode}"}}\n'
    with serve_ranch(config, tmp_path / "t.db") as ranch:
        state, text = status(send(ranch.agent_url("big")))
    assert state == "TASK_STATE_FAILED", text
    assert "agent 'big'" in text and "larger than the limit of 524288 bytes (max_card_bytes)" in text, text


def test_a_card_under_the_limit_is_read(tmp_path: Path, faulty: Faulty) -> None:
    config = f'agents:\n  - {{id: roomy, kind: remote, url: "{faulty.url}/cardkb100"}}\n'
    with serve_ranch(config, tmp_path / "t.db") as ranch:
        assert status(send(ranch.agent_url("roomy"))) == ("TASK_STATE_COMPLETED", "ok from faulty")


@pytest.mark.parametrize("kilobytes", [300, 6 * 1024])
def test_a_member_reply_over_the_limit_fails_the_hop(tmp_path: Path, faulty: Faulty, kilobytes: int) -> None:
    """300 KB is read and refused once folded; 6 MB is not even read to the end."""
    config = f"""
agents:
  - {{id: big, kind: remote, url: "{faulty.url}/bigreply{kilobytes}"}}
  - {{id: ok, kind: remote, url: "{faulty.url}/ok"}}
teams:
  - {{id: crew, members: [big, ok], default_agent: big}}
"""
    with serve_ranch(config, tmp_path / "t.db") as ranch:
        answer = send(ranch.agent_url("crew"))
        state, text = status(answer)
        task_id = answer["result"]["task"]["id"]
        got = httpx.post(
            ranch.agent_url("crew"),
            json={"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}},
            headers={"A2A-Version": "1.0"},
            timeout=DEADLINE,
        )
    assert state == "TASK_STATE_FAILED", text
    assert "agent 'big'" in text and "larger than the limit of 100000 bytes (max_reply_bytes)" in text, text
    assert got.json()["result"]["status"]["state"] == "TASK_STATE_FAILED"
    assert len(got.content) < 100_000  # the reply was not stored


def test_the_reply_limit_is_a_setting(tmp_path: Path, faulty: Faulty) -> None:
    config = f'agents:\n  - {{id: big, kind: remote, url: "{faulty.url}/bigreply300"}}\n'
    with serve_ranch(config, tmp_path / "t.db", max_reply_bytes=400_000) as ranch:
        state, text = status(send(ranch.agent_url("big")))
    assert state == "TASK_STATE_COMPLETED" and len(text) == 300 * 1024, json.dumps(text[:80])
