"""A member reporting its cost in numbers JSON has no room for (`NaN`, `Infinity`) or in words
reports nothing: the team's turn goes on, with or without a budget.

The members are the misbehaving peer's (tests/_support/faulty.py), reached over HTTP; Python's
JSON reader takes `NaN` and `Infinity` from them, protobuf cannot write them back out.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from _support.faulty import USAGE_MODES, Faulty, running_faulty
from _support.hubkit import RunningRanch, reply_text, send_text, serve_ranch


def member(mode: str) -> str:
    return mode.replace("_", "-")


def config(faulty: Faulty) -> str:
    """Per mode, two teams (without and with a budget): front hands "costly" to the member (a static
    route), the member's answer comes back to front, which answers the user."""
    members = "\n".join(
        f'  - {{id: {member(mode)}, kind: remote, url: "{faulty.url}/{mode}"}}' for mode in USAGE_MODES
    )
    teams = "\n".join(
        f"  - {{id: {prefix}-{member(mode)}, members: [front, {member(mode)}], default_agent: front,"
        f" routes: {{front: {member(mode)}, {member(mode)}: front}}{budget}}}"
        for mode in USAGE_MODES
        for prefix, budget in (("plain", ""), ("budget", ", budget: {tokens: 1000}"))
    )
    return f"""
agents:
  - id: front
    kind: rules
    rules:
      - {{match: "costly", reply: "to the member"}}
      - {{reply: "noted", route: user}}
{members}
teams:
{teams}
"""


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRanch]:
    with running_faulty() as faulty:
        database = tmp_path_factory.mktemp("usage") / "t.db"
        with serve_ranch(config(faulty), database) as ranch:
            yield ranch


@pytest.mark.parametrize("team", ["plain", "budget"])
@pytest.mark.parametrize("mode", sorted(USAGE_MODES))
def test_a_member_reporting_unwritable_usage_does_not_fail_the_turn(
    hub: RunningRanch, mode: str, team: str
) -> None:
    task = send_text(hub.agent_url(f"{team}-{member(mode)}"), "costly please", uuid.uuid4().hex)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert reply_text(task) == "noted", task
    trail = task["metadata"]["https://ranch.woi.dev/extensions/client-routing/v1"]["trail"]
    assert [hop["agent"] for hop in trail] == ["front", member(mode), "front"], trail
    spent = [hop.get("tokens") for hop in trail]
    if mode == "trail_nan":  # what could be counted is; the rest reads as null
        assert spent == [None, 2, None], trail
        assert trail[1]["trail"] == [{"agent": "inner", "hop": None, "tokens": None, "reason": "r"}], trail
    else:
        assert spent == [None, None, None], trail  # nothing reported, nothing counted
