"""A member reporting its cost in numbers JSON has no room for (`NaN`, `Infinity`) or in words
reports nothing: the team's turn goes on, with or without a budget.

The members are the misbehaving peer's (tests/_support/faulty.py), reached over HTTP; Python's
JSON reader takes `NaN` and `Infinity` from them, protobuf cannot write them back out.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from _support.faulty import USAGE_MODES, member_id, serve_relaying
from _support.hubkit import RunningRanch, reply_text, send_text

BUDGETS = {"plain": "", "budget": ", budget: {tokens: 1000}"}
"""Per mode, two teams: without and with a budget."""


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRanch]:
    with serve_relaying(USAGE_MODES, tmp_path_factory.mktemp("usage") / "t.db", BUDGETS) as ranch:
        yield ranch


@pytest.mark.parametrize("team", ["plain", "budget"])
@pytest.mark.parametrize("mode", sorted(USAGE_MODES))
def test_a_member_reporting_unwritable_usage_does_not_fail_the_turn(
    hub: RunningRanch, mode: str, team: str
) -> None:
    task = send_text(hub.agent_url(f"{team}-{member_id(mode)}"), "costly please", uuid.uuid4().hex)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert reply_text(task) == "noted", task
    trail = task["metadata"]["https://ranch.woi.dev/extensions/client-routing/v1"]["trail"]
    assert [hop["agent"] for hop in trail] == ["front", member_id(mode), "front"], trail
    spent = [hop.get("tokens") for hop in trail]
    if mode == "trail_nan":  # what could be counted is; the rest reads as null
        assert spent == [None, 2, None], trail
        assert trail[1]["trail"] == [{"agent": "inner", "hop": None, "tokens": None, "reason": "r"}], trail
    else:
        assert spent == [None, None, None], trail  # nothing reported, nothing counted
