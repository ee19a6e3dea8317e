"""The player in process, on turns a live run recorded or written by hand: a member team's recorded
answer carries the hops inside it, a member team that changed inside is called, and a member whose
failure ended the turn fails it again (src/ranch/replay/player.py)."""

from __future__ import annotations

from typing import Any

import pytest

from ranch.config import RanchConfig, parse_config
from ranch.replay.changes import changed_members, fingerprints
from ranch.replay.player import replay
from ranch.replay.recording import RecordedTurn, turn_from_json

pytestmark = pytest.mark.anyio

CONFIG = """
agents:
  - id: triage
    kind: rules
    rules:
      - {match: "(?i)invoice", reply: "For accounts: {text}", route: accounts, reason: money}
      - {match: "(?i)paper", reply: "To research: {text}", route: researcher, reason: needs research}
  - {id: researcher, kind: echo}
  - {id: clerk, kind: echo}
  - {id: auditor, kind: echo}
teams:
  - {id: accounts, members: [clerk, auditor], default_agent: clerk, routes: {clerk: auditor}}
  - id: desk
    members: [triage, researcher, accounts]
    default_agent: triage
    routes: {researcher: user, accounts: user}
"""


def recorded(hops: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {"task": "t1", "input": "pay this invoice", "hops": hops, **fields}


async def recorded_live(config: RanchConfig, text: str) -> RecordedTurn:
    """A turn as the team takes it now, as if it had been recorded."""
    done = await replay(turn_from_json(recorded([], input=text), "desk"), config, mode="live")
    return turn_from_json(recorded(done.new.hops, input=text, state=done.new.state), "desk")


async def test_a_member_teams_recorded_answer_carries_the_hops_inside_it() -> None:
    config = parse_config(CONFIG)
    turn = await recorded_live(config, "pay this invoice")
    assert [hop.agent for hop in turn.hops] == ["triage", "accounts"]
    done = await replay(turn, config, changed=changed_members(config, "desk", fingerprints(config, "desk")))
    assert done.changed == {} and done.called == [] and done.given_back == ["triage", "accounts"]
    assert done.divergence() == "same route"
    assert done.new.reaches("auditor") and done.new.used() == 3
    assert [hop["agent"] for hop in done.new.hops[1]["trail"]] == ["clerk", "auditor"]


async def test_a_member_team_that_changed_inside_is_called() -> None:
    old = parse_config(CONFIG)
    new = parse_config(CONFIG.replace("routes: {clerk: auditor}", "routes: {}"))
    changed = changed_members(new, "desk", fingerprints(old, "desk"))
    assert changed == {"accounts": "changed"}
    done = await replay(await recorded_live(old, "pay this invoice"), new, changed=changed)
    assert done.called == ["accounts"] and done.given_back == ["triage"]
    assert done.divergence() == "same route"  # the same hops of desk; inside accounts, one fewer
    assert not done.new.reaches("auditor") and done.new.used() == 2 and done.old.used() == 3


async def test_a_recorded_failure_fails_the_replay_again() -> None:
    turn = turn_from_json(
        recorded(
            [{"agent": "triage", "sender": "user", "recipient": "researcher", "reason": "needs research"}],
            input="find papers",
            state="failed",
            failure={"agent": "researcher", "message": "its task ended failed: out of coffee"},
        ),
        "desk",
    )
    done = await replay(turn, parse_config(CONFIG))
    assert done.new.state == "failed" and done.old.state == "failed"
    assert done.new.error == done.old.error == "agent 'researcher': its task ended failed: out of coffee"
    assert done.divergence() == "same route" and done.called == []


async def test_a_plain_input_calls_every_member() -> None:
    done = await replay(turn_from_json(recorded([], input="find papers"), "desk"), parse_config(CONFIG))
    assert done.new.stops() == ["user", "triage", "researcher", "user"]
    assert done.called == ["triage", "researcher"] and done.old.hops == []
    assert done.divergence() == "diverged at hop 1: triage now has a hop the old route did not make"
