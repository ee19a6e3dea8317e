"""A member answering `NaN` or `Infinity` in a data part, a part's metadata or its message's metadata
is answered on: those numbers read as null (JSON has no room for them), called directly or through
a team, never an internal error.

The members are the misbehaving peer's (tests/_support/faulty.py `NON_FINITE_MODES`), reached over
HTTP; Python's JSON reader takes `NaN` and `Infinity` from them, protobuf cannot write them back out.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from _support.faulty import NON_FINITE_MODES, member_id, serve_relaying
from _support.hubkit import RunningRanch, reply_text, send_text

NULLED = {
    "nan_data": ("parts", [{"text": "odd"}, {"data": {"score": None, "range": [1, None]}}]),
    "inf_part_metadata": ("parts", [{"text": "odd", "metadata": {"weight": None}}]),
    "nan_metadata": ("metadata", {"confidence": None, "nested": {"max": None}}),
}
"""Mode -> the field of the member's answer that held the numbers, and what it reads as."""


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRanch]:
    with serve_relaying(NON_FINITE_MODES, tmp_path_factory.mktemp("nonfinite") / "t.db") as ranch:
        yield ranch


def send(url: str, version: str | None) -> dict[str, Any]:
    """SendMessage over JSON-RPC, A2A 1.0 or (version None) 0.3; the JSON-RPC answer."""
    message: dict[str, Any] = {"messageId": uuid.uuid4().hex}
    if version is None:
        message |= {"kind": "message", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}
        body: dict[str, Any] = {"method": "message/send", "params": {"message": message}}
        headers = {}
    else:
        message |= {"role": "ROLE_USER", "parts": [{"text": "hi"}]}
        body = {"method": "SendMessage", "params": {"message": message}}
        headers = {"A2A-Version": version}
    answer = httpx.post(url, json={"jsonrpc": "2.0", "id": 9, **body}, headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


@pytest.mark.parametrize("mode", sorted(NON_FINITE_MODES))
def test_a_member_answering_nan_directly_is_answered_with_nulls(hub: RunningRanch, mode: str) -> None:
    field, expected = NULLED[mode]
    answer = send(hub.agent_url(member_id(mode)), "1.0")
    assert "result" in answer, answer
    reply = answer["result"].get("message") or answer["result"]["task"]["status"]["message"]
    assert reply[field] == expected, reply
    legacy = send(hub.agent_url(member_id(mode)), None)  # A2A 0.3: the SDK's adapter writes it out
    assert "result" in legacy, legacy
    assert [p.get("text") for p in legacy["result"]["parts"] if p["kind"] == "text"] == ["odd"], legacy


@pytest.mark.parametrize(
    "mode", ["inf_part_metadata", "nan_data"]
)  # (a message's metadata stays with the hop)
def test_a_member_answering_nan_does_not_fail_the_team_turn(hub: RunningRanch, mode: str) -> None:
    task = send_text(hub.agent_url(f"team-{member_id(mode)}"), "costly please", uuid.uuid4().hex)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert reply_text(task) == "noted", task
    trail = task["metadata"]["https://ranch.woi.dev/extensions/client-routing/v1"]["trail"]
    assert [hop["agent"] for hop in trail] == ["front", member_id(mode), "front"], trail
    answered = [a["parts"] for a in task.get("artifacts", []) if a.get("name") == member_id(mode)]
    assert answered == [NULLED[mode][1]], task  # the member's parts are its artifact in the team's task
