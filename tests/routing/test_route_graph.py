"""Routing that ends where users expect (docs/routing.md, 2.4 "Pipelines", "Loops", "Teams of
teams"): loops caught on the route graph whatever the text, pipelines that end at their last stage,
and a member team's answer that goes on down its caller's pipeline. In process, and over HTTP
between ranch servers with official a2a-sdk peers as members."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from a2a.types import Message, Part, Role, Task, TaskState, TaskStatusUpdateEvent
from google.protobuf.json_format import MessageToDict

from _support.hubkit import serve_ranch
from _support.peers import running_peer
from _support.sdk import sdk_client, send, user_message
from ranch.agents.base import Call
from ranch.catalog.registry import Registry
from ranch.config import parse_config
from ranch.exceptions import ConfigError
from ranch.wire.client import ClientPool
from ranch.wire.client_routing import URI

COMPLETED = TaskState.TASK_STATE_COMPLETED
FAILED = TaskState.TASK_STATE_FAILED
TURN_LIMIT = 20.0
"""Seconds any one turn here may take: a hang fails the test instead of the suite."""


@asynccontextmanager
async def hub(yaml_text: str) -> AsyncIterator[Registry]:
    """The config's agents and teams, built in process (no HTTP)."""
    async with ClientPool() as pool:
        registry = Registry(parse_config(yaml_text), pool)
        try:
            yield registry
        finally:
            await registry.aclose()


async def turn(registry: Registry, team: str, text: str = "hello") -> TaskStatusUpdateEvent:
    """One user message through `team`; its final status."""
    with anyio.fail_after(TURN_LIMIT):
        events = [event async for event in registry.get(team).run(user_message(text), Call())]
    final = events[-1]
    assert isinstance(final, TaskStatusUpdateEvent)
    return final


def data(final: TaskStatusUpdateEvent | Task) -> dict[str, Any]:
    return dict(MessageToDict(final.metadata)[URI])


def text(final: TaskStatusUpdateEvent | Task) -> str:
    return "\n".join(part.text for part in final.status.message.parts)


def agents(final: TaskStatusUpdateEvent | Task) -> list[str]:
    return [hop["agent"] for hop in data(final)["trail"]]


def ask(url: str, words: str = "hello") -> Task:
    async def go() -> Task:
        message = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=words)])
        with anyio.fail_after(TURN_LIMIT * 2):
            async with sdk_client(url) as client:
                (answer,) = await send(client, message)
        return answer.task

    return anyio.run(go)


# -- 1. loops on the route graph, whatever the text ----------------------------------------------

BOUNCE = """
agents:
  - {id: host, kind: rules, rules: [{reply: "host: {text}", route: pa}]}
  - {id: pa, kind: rules, rules: [{reply: "pa: {text}", route: pb}]}
  - {id: pb, kind: rules, rules: [{reply: "pb: {text}", route: pa}]}
teams:
  - {id: bouncy, members: [host, pa, pb], default_agent: host, max_hops: 20}
  - {id: curt, members: [host, pa, pb], default_agent: host, max_hops: 20, on_loop: user}
  - {id: strict, members: [host, pa, pb], default_agent: host, max_hops: 20, on_loop: fail}
"""


@pytest.mark.anyio
async def test_two_members_bouncing_with_changing_text_are_a_loop_caught_early() -> None:
    async with hub(BOUNCE) as registry:
        strict = await turn(registry, "strict")
        assert strict.status.state == FAILED
        assert data(strict)["error"]["type"] == "RoutingLoop"  # not HopLimitExceeded after 20 hops
        assert "pa -> pb -> pa went round 3 times and started again (on_loop: fail)" in text(strict)
        trail = data(strict)["trail"]
        assert len(trail) == 8  # host, then three rounds of pa <-> pb, and the edge starting a fourth
        assert (trail[-1]["agent"], trail[-1].get("loop"), trail[-1]["reason"]) == (
            "pa", True, "loop: pa -> pb -> pa x3"
        )  # fmt: skip

        curt = await turn(registry, "curt")
        assert curt.status.state == COMPLETED
        assert len(data(curt)["trail"]) == 8
        assert "[ranch] pa -> pb -> pa went round 3 times and started again; the turn ended." in text(curt)

        bouncy = await turn(registry, "bouncy")  # the first loop goes to the default agent, the second ends
        assert bouncy.status.state == COMPLETED, text(bouncy)
        loops = [(hop["agent"], hop["recipient"]) for hop in data(bouncy)["trail"] if hop.get("loop")]
        assert loops == [("pa", "host"), ("pa", "user")]
        assert len(data(bouncy)["trail"]) == 16


def test_sdk_peers_bouncing_over_http_are_a_loop(tmp_path: Path) -> None:
    with running_peer("router", route_to="pb", reason="pb next") as pa:
        with running_peer("router", route_to="pa", reason="pa next") as pb:
            config = f"""
agents:
  - {{id: pa, kind: remote, url: "{pa.url}", timeout: 10}}
  - {{id: pb, kind: remote, url: "{pb.url}", timeout: 10}}
teams:
  - {{id: duo, members: [pa, pb], default_agent: pa, max_hops: 20, on_loop: user}}
"""
            with serve_ranch(config, tmp_path / "l.db") as ranch:
                task = ask(ranch.agent_url("duo"))
    assert task.status.state == COMPLETED, text(task)
    trail = data(task)["trail"]
    assert len(trail) == 7  # three rounds of pa <-> pb, and the edge starting a fourth
    assert trail[-1]["loop"] is True
    assert "pa -> pb -> pa went round 3 times and started again; the turn ended." in text(task)


REVIEW = """
agents:
  - {id: writer, kind: rules, rules: [{reply: "draft: {text}", route: critic, reason: "review it"}]}
  - {id: critic, kind: rules, rules: [
      {match: "^draft: (revise: draft: ){2}", reply: "approved", route: user, reason: "good enough"},
      {reply: "revise: {text}", route: writer, reason: "not yet"}]}
  - {id: author, kind: rules, rules: [
      {match: "^(revise: draft: ){3}", reply: "final: {text}", route: user, reason: "three rounds"},
      {reply: "draft: {text}", route: reviewer}]}
  - {id: reviewer, kind: rules, rules: [{reply: "revise: {text}"}]}
teams:
  - {id: review, members: [writer, critic], default_agent: writer, on_loop: fail}
  - {id: rounds, members: [author, reviewer], default_agent: author, on_loop: fail}
  - {id: hasty, members: [writer, critic], default_agent: writer, on_loop: fail, loop_cycles: 2}
"""


@pytest.mark.anyio
async def test_a_review_loop_of_three_rounds_with_changing_drafts_is_not_cut_short() -> None:
    async with hub(REVIEW) as registry:
        # the critic approves the third draft
        review = await turn(registry, "review")
        assert review.status.state == COMPLETED, text(review)
        assert agents(review) == ["writer", "critic"] * 3
        assert text(review) == "approved"
        assert not any(hop.get("loop") for hop in data(review)["trail"])

        # the reviewer decides nothing (back to the default agent), the author ends after round three
        rounds = await turn(registry, "rounds")
        assert rounds.status.state == COMPLETED, text(rounds)
        assert agents(rounds) == ["author", "reviewer"] * 3 + ["author"]
        assert text(rounds).startswith("final: ")

        # the threshold is the team's: two rounds, and the third is a loop
        hasty = await turn(registry, "hasty")
        assert hasty.status.state == FAILED
        assert data(hasty)["error"]["type"] == "RoutingLoop"
        assert "writer -> critic -> writer went round 2 times" in text(hasty)


def test_loop_cycles_is_checked_with_the_field_named() -> None:
    bad = REVIEW.replace("loop_cycles: 2", "loop_cycles: 0")
    with pytest.raises(ConfigError, match="loop_cycles"):
        parse_config(bad)
    with pytest.raises(ConfigError, match="on_done"):
        parse_config(REVIEW.replace("loop_cycles: 2", "on_done: later"))


# -- 2. pipelines end ----------------------------------------------------------------------------

PIPELINE = """
agents:
  - {id: lead, kind: rules, rules: [{reply: "lead: {text}"}]}
  - {id: p1, kind: echo}
  - {id: p2, kind: echo}
  - {id: boss, kind: rules, rules: [{match: "^again", reply: "boss: {text}"}, {reply: "again", route: p1}]}
teams:
  - {id: line, members: [lead, p1, p2], default_agent: lead, routes: {lead: p1, p1: p2}}
  - {id: supervised, members: [boss, p1, p2], default_agent: boss, routes: {p1: p2}}
"""


@pytest.mark.anyio
async def test_a_pipeline_from_the_default_agent_ends_at_its_last_stage() -> None:
    async with hub(PIPELINE) as registry:
        line = await turn(registry, "line")
        assert line.status.state == COMPLETED, text(line)
        assert agents(line) == ["lead", "p1", "p2"]  # not lead -> p1 -> p2 -> lead -> ... until max_hops
        assert data(line)["trail"][-1]["reason"] == "end of the pipeline"
        assert text(line) == "lead: hello"

        # a member reached by a decision that decides nothing still goes back to the default agent
        supervised = await turn(registry, "supervised")
        assert supervised.status.state == COMPLETED, text(supervised)
        assert agents(supervised) == ["boss", "p1", "p2", "boss"]
        assert text(supervised) == "boss: again"


def test_a_pipeline_of_sdk_peers_over_http_ends(tmp_path: Path) -> None:
    with running_peer("plain") as p1, running_peer("plain") as p2:
        config = f"""
agents:
  - {{id: lead, kind: rules, rules: [{{reply: "lead: {{text}}"}}]}}
  - {{id: p1, kind: remote, url: "{p1.url}", timeout: 10}}
  - {{id: p2, kind: remote, url: "{p2.url}", timeout: 10}}
teams:
  - {{id: line, members: [lead, p1, p2], default_agent: lead, routes: {{lead: p1, p1: p2}}}}
"""
        with serve_ranch(config, tmp_path / "p.db") as ranch:
            task = ask(ranch.agent_url("line"))
    assert task.status.state == COMPLETED, text(task)
    assert agents(task) == ["lead", "p1", "p2"]
    assert text(task).startswith("plain saw: ")


# -- 3. a member team's `user` is its answer -----------------------------------------------------

NESTED = """
agents:
  - {id: front, kind: rules, rules: [{reply: "front: {text}"}]}
  - {id: f1, kind: rules, rules: [{reply: "fin checked: {text}", route: user, reason: "fin is done"}]}
  - {id: writer, kind: rules, rules: [{reply: "writer wrote: {text}"}]}
teams:
  - {id: fin, members: [f1], default_agent: f1}
  - {id: fin-up, members: [f1], default_agent: f1, on_done: escalate}
  - {id: desk, members: [front, fin, writer], default_agent: front, routes: {front: fin, fin: writer}}
  - id: desk-up
    members: [front, fin-up, writer]
    default_agent: front
    routes: {front: fin-up, fin-up: writer}
"""


@pytest.mark.anyio
async def test_a_member_team_that_finishes_returns_its_answer_to_the_callers_pipeline() -> None:
    async with hub(NESTED) as registry:
        desk = await turn(registry, "desk")
        assert desk.status.state == COMPLETED, text(desk)
        assert agents(desk) == ["front", "fin", "writer"]  # not front -> fin -> user
        assert text(desk) == "writer wrote: fin checked: front: hello"

        escalated = await turn(registry, "desk-up")  # `on_done: escalate`: the inner `user` ends it all
        assert escalated.status.state == COMPLETED, text(escalated)
        assert agents(escalated) == ["front", "fin-up"]


def test_a_remote_team_of_sdk_peers_returns_its_answer_to_the_callers_pipeline(tmp_path: Path) -> None:
    with running_peer("router", route_to="user", reason="done here") as checker:
        inner = f"""
agents:
  - {{id: checker, kind: remote, url: "{checker.url}", timeout: 10}}
teams:
  - {{id: fin, members: [checker], default_agent: checker}}
"""
        with serve_ranch(inner, tmp_path / "a.db") as a:
            outer = f"""
agents:
  - {{id: front, kind: rules, rules: [{{reply: "front: {{text}}"}}]}}
  - {{id: fin, kind: remote, url: "{a.agent_url("fin")}", timeout: 10}}
  - {{id: writer, kind: rules, rules: [{{reply: "writer wrote: {{text}}"}}]}}
teams:
  - {{id: desk, members: [front, fin, writer], default_agent: front, routes: {{front: fin, fin: writer}}}}
"""
            with serve_ranch(outer, tmp_path / "b.db") as b:
                task = ask(b.agent_url("desk"))
    assert task.status.state == COMPLETED, text(task)
    trail = data(task)["trail"]
    assert [hop["agent"] for hop in trail] == ["front", "fin", "writer"]
    assert [hop["agent"] for hop in trail[1]["trail"]] == ["checker"]  # the sdk peer decided `user` in fin
    assert text(task).startswith("writer wrote: router saw: ")


# -- a triangle across a nested remote team ----------------------------------------------------


def test_a_triangle_through_a_remote_member_team_is_caught(tmp_path: Path) -> None:
    with running_peer("router", route_to="a", reason="back to a") as sender_back:
        inner = f"""
agents:
  - {{id: bouncer, kind: remote, url: "{sender_back.url}", timeout: 10}}
teams:
  - {{id: far, members: [bouncer], default_agent: bouncer}}
"""
        with serve_ranch(inner, tmp_path / "a.db") as a:
            outer = f"""
agents:
  - {{id: a, kind: rules, rules: [{{reply: "a: {{text}}", route: b}}]}}
  - {{id: b, kind: rules, rules: [{{reply: "b: {{text}}", route: far}}]}}
  - {{id: far, kind: remote, url: "{a.agent_url("far")}", timeout: 10}}
teams:
  - {{id: ring, members: [a, b, far], default_agent: a, max_hops: 30, on_loop: fail}}
"""
            with serve_ranch(outer, tmp_path / "b.db") as b:
                task = ask(b.agent_url("ring"))
    assert task.status.state == FAILED
    assert data(task)["error"]["type"] == "RoutingLoop", text(task)  # not the hop limit of 30
    assert "a -> b -> far -> a went round 3 times and started again" in text(task)
    trail = data(task)["trail"]
    assert len(trail) == 10
    assert trail[-1]["loop"] is True
    assert all("to a, outside far" in hop["trail"][0]["reason"] for hop in trail if hop["agent"] == "far")
