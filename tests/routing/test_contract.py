"""The routing contract over real HTTP: seed 002's scenarios and docs/routing.md sections 1-3.

One ranch server for the module, on 127.0.0.1, with one small team per scenario. Teams are
called with the official a2a-sdk client; `kind: python` probes (tests/probes.py) record every
message they receive, so each test checks both what the caller got back (the Task, its
artifacts and trail) and what every member was shown (content, context part, request data).

Probes keep a reply counter for the whole module, so a team whose probes use `replies` is
used by one test only.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from a2a.types import (
    GetTaskRequest,
    Message,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
)
from google.protobuf.json_format import MessageToDict

from _support import probes
from _support.hubkit import RunningRanch, serve_ranch
from _support.sdk import sdk_client, send, trail_of, user_message
from ranch.agents.base import CONTEXT_PART_KEY
from ranch.routing.context import HEADER
from ranch.wire.client_routing import URI, X_RECIPIENT

COMPLETED = TaskState.TASK_STATE_COMPLETED
FAILED = TaskState.TASK_STATE_FAILED
WORKING = TaskState.TASK_STATE_WORKING

YAML = r"""
agents:
  # -- seed 002, US1: a default agent and a smart agent, both routing with x-recipient
  - {id: us1-default, kind: python, entry: "_support.probes:Probe", client_routing: true,
     name: Default, description: Receives everything first,
     skills: [{id: triage, name: triage}],
     options: {reply: "default routed: {text}", route: us1-smart, form: x-recipient}}
  - {id: us1-smart, kind: python, entry: "_support.probes:Probe", client_routing: true,
     name: Smart, description: Knows things,
     skills: [{id: research, name: research}, {id: summarize, name: summarize}],
     options: {reply: "smart answer to: {text}", route: user, form: x-recipient}}

  # -- seed 002, US2: no recipient -> the default agent
  - {id: us2-default, kind: python, entry: "_support.probes:Probe", options: {reply: "us2 default: {text}"}}
  - {id: us2-worker, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "us2 worker: {text}"}}

  # -- seed 002, US3: back to sender
  - {id: us3-back, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "us3 back: {text}", route: sender, form: x-recipient}}
  - {id: us3-user, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "us3 user: {text}", route: user, form: x-recipient}}
  - id: us3-agent-a
    kind: rules
    rules:
      - {match: "^us3-agent-b says", reply: "agent-a got: {text}", route: user, reason: b answered}
      - {reply: "agent-a asks b: {text}", route: us3-agent-b, reason: ask b}
  - {id: us3-agent-b, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "us3-agent-b says: {text}", route: us3-agent-a, form: x-recipient}}

  # -- SC-001: User -> Default -> Worker -> Default -> User, metadata routing only
  - id: sc1-default
    kind: rules
    rules:
      - {match: "^sc1 work done", reply: "final: {text}", route: user, reason: work is done}
      - {reply: "please do: {text}", route: sc1-worker, reason: needs work}
  - {id: sc1-worker, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "sc1 work done for <{text}>", route: sc1-default, reason: back to default}}
  - {id: sc1-idle, kind: echo}

  # -- SC-002 / SC-003: peer lists only for capable agents
  - {id: sc2-boss, kind: python, entry: "_support.probes:Probe", client_routing: true,
     name: Boss, description: Hands work out, skills: [{id: plan, name: planning}],
     options: {reply: "boss: {text}", route: sc2-smart, reason: smart can do it}}
  - {id: sc2-smart, kind: python, entry: "_support.probes:Probe", client_routing: true,
     name: Smart Two, description: Thinks,
     skills: [{id: think, name: thinking}, {id: sum, name: summing}],
     options: {reply: "smart: {text}", route: user, reason: smart finishes}}
  - {id: sc2-plain, kind: python, entry: "_support.probes:Probe", client_routing: false,
     name: Plain, description: Does one thing, skills: [{id: one, name: one-thing}],
     options: {reply: "plain: {text}"}}
  - id: sc2-rules
    kind: rules
    name: Rules
    description: Follows rules
    skills: [{id: r1, name: rule-one}, {id: r2, name: rule-two}]
    rules: [{reply: "rules: {text}", route: user}]
  - {id: sc2-echo, kind: echo, name: Echo, description: Echoes, skills: [{id: e, name: echoing}]}

  # -- section 2.1: the first recipient
  - {id: first-default, kind: python, entry: "_support.probes:Probe",
     options: {reply: "first default: {text}"}}
  - {id: first-worker, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "first worker: {text}", route: user}}

  # -- section 2.3: the recipient forms in replies (a -> b -> user, each written in one form)
  - {id: forms-default, kind: python, entry: "_support.probes:Probe", options: {reply: "forms default"}}
  - {id: f-uri-a, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "a: {text}", route: f-uri-b, form: uri, reason: uri form}}
  - {id: f-uri-b, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "b: {text}", route: user, form: uri}}
  - {id: f-x-a, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "a: {text}", route: f-x-b, form: x-recipient}}
  - {id: f-x-b, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "b: {text}", route: user, form: x-recipient}}
  - {id: f-obj-a, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "a: {text}", route: f-obj-b, form: object}}
  - {id: f-obj-b, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "b: {text}", route: user, form: object}}
  - {id: f-task-a, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "a: {text}", route: f-task-b, task: true}}
  - {id: f-task-b, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "b: {text}", route: user, task: true, form: object}}

  # -- section 2.3: "sender" from an agent goes back to that agent
  - id: sendr-a
    kind: rules
    rules:
      - {match: "^sendr-b saw", reply: "a is done: {text}", route: user, reason: b replied}
      - {reply: "a asks: {text}", route: sendr-b, reason: ask b}
  - {id: sendr-b, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "sendr-b saw: {text}", route: sender, reason: back to whoever asked}}

  # -- section 2.3: "user" ends the turn
  - {id: ends-a, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "ends-a answers", route: user, reason: done}}
  - {id: ends-b, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "never"}}

  # -- section 2.3: invalid recipients
  - {id: inv-default, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "inv default handled it"}}
  - {id: inv-bad, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "inv-bad reply", route: ghost-one}}
  - {id: invd-default, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "invd default reply", route: ghost-two}}
  - {id: invd-other, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "never"}}
  - {id: inverr-a, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "inverr reply", route: ghost-three}}
  - {id: inverr-b, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "never"}}
  - {id: selfr-default, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "selfr default handled it"}}
  - {id: selfr-me, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "selfr-me reply", route: selfr-me}}

  # -- section 2.3 / 2.4: no decision -> static route, else default; default deciding nothing ends
  - {id: static-d, kind: python, entry: "_support.probes:Probe", options: {reply: "static-d: {text}"}}
  - {id: static-a, kind: python, entry: "_support.probes:Probe", options: {reply: "static-a: {text}"}}
  - {id: static-b, kind: python, entry: "_support.probes:Probe", options: {reply: "static-b: {text}"}}

  # -- section 1: handoffs narrow the peers offered to the next agent
  - {id: hand-a, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "hand-a", route: hand-b, handoffs: [hand-c, hand-b]}}
  - {id: hand-b, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "hand-b", route: user}}
  - {id: hand-c, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "never"}}
  - {id: hand-d, kind: python, entry: "_support.probes:Probe", options: {reply: "never"}}

  # -- section 2.5: hop limit
  - {id: loop-a, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "loop-a turn", route: loop-b}}
  - {id: loop-b, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "loop-b turn", route: loop-a}}

  # -- section 1: hopsRemaining, trail and sender in the request data
  - {id: hops-a, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "hops-a", route: hops-b}}
  - {id: hops-b, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "hops-b", route: hops-c}}
  - {id: hops-c, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "hops-c", route: user}}

  # -- section 2.6: the per-agent context window
  - {id: ctx-a, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "ctx-a reply", route: ctx-b}}
  - {id: ctx-b, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "ctx-b reply", route: ctx-c}}
  - {id: ctx-c, kind: python, entry: "_support.probes:Probe", client_routing: true, history_length: 1,
     options: {reply: "ctx-c reply", route: ctx-d}}
  - {id: ctx-d, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "ctx-d reply", route: user}}

  # -- section 2.8: failures
  - {id: fail-a, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "fail-a reply", route: fail-b}}
  - {id: fail-b, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {fail: "boom in fail-b"}}
  - {id: slow-a, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "slow-a reply", route: slow-b}}
  - {id: slow-b, kind: python, entry: "_support.probes:Probe", client_routing: true, timeout: 0.5,
     options: {sleep: 5, reply: "too late", route: user}}

  # -- section 3: multi-turn by contextId
  - {id: multi-a, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {replies: ["multi-a one", "multi-a two"], route: multi-b}}
  - {id: multi-b, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {replies: ["multi-b one", "multi-b two"], route: user}}
  - {id: own-a, kind: python, entry: "_support.probes:Probe", options: {reply: "own-a answers {text}"}}

  # -- section 3: streaming
  - {id: stream-a, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "stream-a reply", route: stream-b, reason: b next}}
  - {id: stream-b, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "stream-b reply", route: stream-c, reason: c next}}
  - {id: stream-c, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "stream-c reply", route: user, reason: all done}}

  # -- section 3: GetTask on a settled team task
  - {id: store-echo, kind: echo}

teams:
  - {id: us1, members: [us1-default, us1-smart], default_agent: us1-default}
  - {id: us2, members: [us2-default, us2-worker], default_agent: us2-default}
  - {id: us3a, members: [us3-back, us3-user], default_agent: us3-back}
  - {id: us3b, members: [us3-agent-a, us3-agent-b], default_agent: us3-agent-a}
  - {id: sc1, members: [sc1-default, sc1-worker, sc1-idle], default_agent: sc1-default}
  - {id: sc2, members: [sc2-boss, sc2-smart, sc2-plain, sc2-rules, sc2-echo], default_agent: sc2-boss}
  - {id: first, members: [first-default, first-worker], default_agent: first-default}
  - id: forms
    members: [forms-default, f-uri-a, f-uri-b, f-x-a, f-x-b, f-obj-a, f-obj-b, f-task-a, f-task-b]
    default_agent: forms-default
  - {id: sendr, members: [sendr-a, sendr-b], default_agent: sendr-a}
  - {id: ends, members: [ends-a, ends-b], default_agent: ends-a}
  - {id: inv, members: [inv-default, inv-bad], default_agent: inv-default}
  - {id: invd, members: [invd-default, invd-other], default_agent: invd-default}
  - {id: inverr, members: [inverr-a, inverr-b], default_agent: inverr-a, on_invalid_recipient: error}
  - {id: selfr, members: [selfr-default, selfr-me], default_agent: selfr-default}
  - id: static
    members: [static-d, static-a, static-b]
    default_agent: static-d
    routes: {static-a: static-b}
  - {id: hand, members: [hand-a, hand-b, hand-c, hand-d], default_agent: hand-a}
  - {id: loop, members: [loop-a, loop-b], default_agent: loop-a, max_hops: 3}
  - {id: hops, members: [hops-a, hops-b, hops-c], default_agent: hops-a, max_hops: 5}
  - {id: ctx, members: [ctx-a, ctx-b, ctx-c, ctx-d], default_agent: ctx-a}
  - {id: failing, members: [fail-a, fail-b], default_agent: fail-a}
  - {id: slow, members: [slow-a, slow-b], default_agent: slow-a}
  - {id: multi, members: [multi-a, multi-b], default_agent: multi-a}
  - {id: own, members: [own-a], default_agent: own-a}
  - {id: stream, members: [stream-a, stream-b, stream-c], default_agent: stream-a}
  - {id: store, members: [store-echo], default_agent: store-echo}
"""


@pytest.fixture(scope="module")
def ranch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRanch]:
    with serve_ranch(YAML, tmp_path_factory.mktemp("contract") / "t.db") as running:
        yield running


# -- helpers ------------------------------------------------------------------------------------------


async def turn(ranch: RunningRanch, team: str, text: str, **message: Any) -> Task:
    """One SendMessage to `team`; the Task it returns."""
    async with sdk_client(ranch.agent_url(team)) as client:
        [response] = await send(client, user_message(text, **message))
    assert response.HasField("task"), response
    return response.task


def status_text(task: Task) -> str:
    return "\n".join(part.text for part in task.status.message.parts)


def artifacts(task: Task) -> list[tuple[str, str]]:
    """(name, text) of every artifact, in order: one per hop."""
    return [(a.name, "\n".join(p.text for p in a.parts)) for a in task.artifacts]


def route_of(task: Task) -> list[tuple[str, str, str]]:
    """(agent, sender, recipient) of every hop in the trail."""
    return [(hop["agent"], hop["sender"], hop["recipient"]) for hop in trail_of(task)]


def error_of(task: Task) -> dict[str, Any]:
    return dict(MessageToDict(task.metadata).get(URI, {}).get("error", {}))


def received(agent: str) -> list[Message]:
    return list(probes.RECEIVED[agent])


def content(message: Message) -> list[str]:
    """The text of every part except the Router's context part."""
    return [p.text for p in message.parts if CONTEXT_PART_KEY not in p.metadata.fields]


def context_of(message: Message) -> str | None:
    """The context part's text (it must come first), or None when there is none."""
    marked = [p for p in message.parts if CONTEXT_PART_KEY in p.metadata.fields]
    if not marked:
        return None
    assert len(marked) == 1, "one context part at most"
    assert CONTEXT_PART_KEY in message.parts[0].metadata.fields, "the context part comes first"
    assert MessageToDict(marked[0].metadata)[CONTEXT_PART_KEY] is True
    text: str = marked[0].text
    return text


def context_lines(message: Message) -> list[str]:
    """The context part's entries (`speaker: text`), without its header."""
    text = context_of(message)
    if text is None:
        return []
    header, *lines = text.split("\n")
    assert header == HEADER
    return lines


def request_of(message: Message) -> dict[str, Any]:
    """metadata[URI] as the member received it (the routing request data); it must be there."""
    data = probes.metadata_of(message).get(URI)
    assert isinstance(data, dict), f"no routing request data in {probes.metadata_of(message)}"
    return dict(data)


def peer_ids(message: Message) -> list[str]:
    return [card["id"] for card in request_of(message)["agentCards"]]


def check_hop_fields(trail: list[dict[str, Any]]) -> None:
    """Every trail entry is exactly {agent, sender, recipient, reason, ms}."""
    for hop in trail:
        assert set(hop) == {"agent", "sender", "recipient", "reason", "ms"}, hop
        assert isinstance(hop["reason"], str) and hop["reason"]
        assert isinstance(hop["ms"], int | float) and hop["ms"] >= 0


# -- seed 002, user story 1 ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_us1_1_default_agent_receives_the_message_first(ranch: RunningRanch) -> None:
    """US1.1: with no recipient named, the team's default agent receives the user's message first."""
    task = await turn(ranch, "us1", "hello team")
    assert task.status.state == COMPLETED
    assert trail_of(task)[0]["agent"] == "us1-default"
    assert trail_of(task)[0]["sender"] == "user"
    [first] = received("us1-default")
    assert content(first) == ["hello team"]
    assert context_of(first) is None  # nothing earlier in this conversation


@pytest.mark.anyio
async def test_us1_2_routing_default_agent_receives_the_other_agents(ranch: RunningRanch) -> None:
    """US1.2: a default agent supporting client-routing gets the other members in metadata[URI].agentCards."""
    await turn(ranch, "us1", "hello team")
    [first] = received("us1-default")
    request = request_of(first)
    assert request["sender"] == "user"
    assert request["agentCards"] == [
        {
            "id": "us1-smart",
            "name": "Smart",
            "description": "Knows things",
            "capabilities": ["research", "summarize"],
            "supportsClientRouting": True,
        }
    ]
    assert URI in first.extensions


@pytest.mark.anyio
async def test_us1_3_x_recipient_from_the_default_agent_forwards_to_the_smart_agent(
    ranch: RunningRanch,
) -> None:
    """US1.3: the default agent answering `x-recipient: us1-smart` makes the smart agent the next hop."""
    task = await turn(ranch, "us1", "hello team")
    assert route_of(task)[0] == ("us1-default", "user", "us1-smart")
    [forwarded] = received("us1-smart")
    assert content(forwarded) == ["default routed: hello team"]
    assert request_of(forwarded)["sender"] == "us1-default"


@pytest.mark.anyio
async def test_us1_4_x_recipient_user_returns_the_final_response_to_the_user(ranch: RunningRanch) -> None:
    """US1.4: the smart agent answering `x-recipient: user` ends the turn with its reply as the result."""
    task = await turn(ranch, "us1", "hello team")
    assert task.status.state == COMPLETED
    assert status_text(task) == "smart answer to: default routed: hello team"
    assert route_of(task) == [("us1-default", "user", "us1-smart"), ("us1-smart", "us1-default", "user")]
    assert artifacts(task) == [
        ("us1-default", "default routed: hello team"),
        ("us1-smart", "smart answer to: default routed: hello team"),
    ]
    check_hop_fields(trail_of(task))


# -- seed 002, user story 2 ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_us2_1_message_without_recipient_goes_to_the_default_agent(ranch: RunningRanch) -> None:
    """US2.1: a message with no x-recipient metadata is routed to the default agent."""
    task = await turn(ranch, "us2", "no recipient here")
    assert task.status.state == COMPLETED
    assert [content(m) for m in received("us2-default")] == [["no recipient here"]]
    assert received("us2-worker") == []
    assert route_of(task) == [("us2-default", "user", "user")]
    assert status_text(task) == "us2 default: no recipient here"


@pytest.mark.anyio
async def test_us2_2_reply_without_recipient_goes_to_the_default_agent(ranch: RunningRanch) -> None:
    """US2.2: an agent's reply without a recipient is routed to the default agent."""
    task = await turn(ranch, "us2", "start at the worker", metadata={X_RECIPIENT: "us2-worker"})
    assert task.status.state == COMPLETED
    assert route_of(task) == [("us2-worker", "user", "us2-default"), ("us2-default", "us2-worker", "user")]
    [at_default] = received("us2-default")
    assert content(at_default) == ["us2 worker: start at the worker"]
    assert status_text(task) == "us2 default: us2 worker: start at the worker"


# -- seed 002, user story 3 ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_us3_1_reply_to_a_message_from_the_user_goes_back_to_the_user(ranch: RunningRanch) -> None:
    """US3.1: an agent answering a message from the user with `user` or `sender` returns to the user."""
    by_sender = await turn(ranch, "us3a", "question one")
    assert by_sender.status.state == COMPLETED
    assert route_of(by_sender) == [("us3-back", "user", "user")]
    assert status_text(by_sender) == "us3 back: question one"

    by_user = await turn(ranch, "us3a", "question two", metadata={X_RECIPIENT: "us3-user"})
    assert by_user.status.state == COMPLETED
    assert route_of(by_user) == [("us3-user", "user", "user")]
    assert status_text(by_user) == "us3 user: question two"
    assert len(received("us3-back")) == 1


@pytest.mark.anyio
async def test_us3_2_agent_b_naming_agent_a_forwards_to_agent_a(ranch: RunningRanch) -> None:
    """US3.2: A sent to B; B answering `x-recipient: us3-agent-a` forwards B's reply to A."""
    task = await turn(ranch, "us3b", "compute it")
    assert task.status.state == COMPLETED
    assert route_of(task) == [
        ("us3-agent-a", "user", "us3-agent-b"),
        ("us3-agent-b", "us3-agent-a", "us3-agent-a"),
        ("us3-agent-a", "us3-agent-b", "user"),
    ]
    [at_b] = received("us3-agent-b")
    assert content(at_b) == ["agent-a asks b: compute it"]
    assert status_text(task) == "agent-a got: us3-agent-b says: agent-a asks b: compute it"


# -- seed 002, success criteria -----------------------------------------------------------------------


@pytest.mark.anyio
async def test_sc_001_user_default_worker_default_user_by_metadata_only(ranch: RunningRanch) -> None:
    """SC-001: User -> Default -> Worker -> Default -> User using only metadata routing decisions."""
    assert next(team for team in ranch.config.teams if team.id == "sc1").routes == {}
    task = await turn(ranch, "sc1", "the job")
    assert task.status.state == COMPLETED
    trail = trail_of(task)
    check_hop_fields(trail)
    assert route_of(task) == [
        ("sc1-default", "user", "sc1-worker"),
        ("sc1-worker", "sc1-default", "sc1-default"),
        ("sc1-default", "sc1-worker", "user"),
    ]
    assert [hop["reason"] for hop in trail] == ["needs work", "back to default", "work is done"]
    assert status_text(task) == "final: sc1 work done for <please do: the job>"
    assert [name for name, _ in artifacts(task)] == ["sc1-default", "sc1-worker", "sc1-default"]


@pytest.mark.anyio
async def test_sc_002_capable_agents_receive_their_peers_without_themselves(ranch: RunningRanch) -> None:
    """SC-002: capable agents get every other member, with supportsClientRouting and skill names."""
    task = await turn(ranch, "sc2", "plan this")
    assert task.status.state == COMPLETED
    assert route_of(task) == [("sc2-boss", "user", "sc2-smart"), ("sc2-smart", "sc2-boss", "user")]

    cards = {
        "sc2-boss": {
            "id": "sc2-boss",
            "name": "Boss",
            "description": "Hands work out",
            "capabilities": ["planning"],
            "supportsClientRouting": True,
        },
        "sc2-smart": {
            "id": "sc2-smart",
            "name": "Smart Two",
            "description": "Thinks",
            "capabilities": ["thinking", "summing"],
            "supportsClientRouting": True,
        },
        "sc2-plain": {
            "id": "sc2-plain",
            "name": "Plain",
            "description": "Does one thing",
            "capabilities": ["one-thing"],
            "supportsClientRouting": False,
        },
        "sc2-rules": {
            "id": "sc2-rules",
            "name": "Rules",
            "description": "Follows rules",
            "capabilities": ["rule-one", "rule-two"],
            "supportsClientRouting": True,
        },
        "sc2-echo": {
            "id": "sc2-echo",
            "name": "Echo",
            "description": "Echoes",
            "capabilities": ["echoing"],
            "supportsClientRouting": False,
        },
    }
    for agent in ("sc2-boss", "sc2-smart"):
        [message] = received(agent)
        request = request_of(message)
        expected = [card for member, card in cards.items() if member != agent]
        assert request["agentCards"] == expected, agent
        assert URI in message.extensions
        assert URI in probes.CALLS[agent][0].extensions  # the A2A-Extensions service parameter


@pytest.mark.anyio
async def test_sc_003_agents_without_the_extension_receive_no_peers(ranch: RunningRanch) -> None:
    """SC-003: a member that does not declare the extension gets no metadata[URI], no extensions entry."""
    metadata = {URI: {"recipient": "sc2-plain", "agentCards": []}, X_RECIPIENT: "sc2-plain", "other": "kept?"}
    task = await turn(ranch, "sc2", "straight to plain", metadata=metadata)
    assert task.status.state == COMPLETED
    assert route_of(task)[0] == ("sc2-plain", "user", "sc2-boss")
    [at_plain] = received("sc2-plain")
    assert URI not in probes.metadata_of(at_plain)
    assert X_RECIPIENT not in probes.metadata_of(at_plain)
    assert URI not in at_plain.extensions
    assert URI not in probes.CALLS["sc2-plain"][0].extensions
    assert content(at_plain) == ["straight to plain"]


# -- section 2.1: the first recipient --------------------------------------------------------------------


@pytest.mark.anyio
async def test_first_recipient_from_metadata_uri_recipient(ranch: RunningRanch) -> None:
    """2.1: the member named by the incoming message's metadata[URI].recipient receives it first."""
    task = await turn(ranch, "first", "for the worker", metadata={URI: {"recipient": "first-worker"}})
    assert task.status.state == COMPLETED
    assert route_of(task) == [("first-worker", "user", "user")]
    assert received("first-default") == []
    assert [content(m) for m in received("first-worker")] == [["for the worker"]]
    assert status_text(task) == "first worker: for the worker"


@pytest.mark.anyio
async def test_first_recipient_from_x_recipient(ranch: RunningRanch) -> None:
    """2.1: the member named by the incoming message's x-recipient receives it first."""
    task = await turn(ranch, "first", "for the worker", metadata={X_RECIPIENT: "first-worker"})
    assert route_of(task) == [("first-worker", "user", "user")]
    assert received("first-default") == []
    assert len(received("first-worker")) == 1


@pytest.mark.anyio
@pytest.mark.parametrize(
    "metadata",
    [
        {URI: {"recipient": "nobody"}},
        {X_RECIPIENT: "nobody"},
        {URI: {"recipient": "us1-smart"}},  # served by this ranch, but not a member of this team
        {X_RECIPIENT: "first"},  # the team itself
        {URI: {"recipient": {"type": "agent", "id": "ghost"}}},
    ],
    ids=[
        "uri-unknown",
        "x-recipient-unknown",
        "uri-other-team-member",
        "x-recipient-team-itself",
        "object-unknown",
    ],
)
async def test_first_recipient_not_a_member_falls_back_to_the_default_agent(
    ranch: RunningRanch, metadata: dict[str, Any]
) -> None:
    """2.1: a first recipient that is not a member of the team means the default agent."""
    task = await turn(ranch, "first", "who gets this", metadata=metadata)
    assert task.status.state == COMPLETED
    assert route_of(task) == [("first-default", "user", "user")]
    assert received("first-worker") == []
    assert received("us1-smart") == []
    assert status_text(task) == "first default: who gets this"


# -- section 2.3: next recipient ---------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("form", ["uri", "x", "obj", "task"])
async def test_reply_recipient_forms_route(ranch: RunningRanch, form: str) -> None:
    """2.3: a reply's recipient works as metadata[URI] string, x-recipient, object form, in a Task."""
    a, b = f"f-{form}-a", f"f-{form}-b"
    task = await turn(ranch, "forms", "go", metadata={X_RECIPIENT: a})
    assert task.status.state == COMPLETED, status_text(task)
    assert route_of(task) == [(a, "user", b), (b, a, "user")]
    [at_b] = received(b)
    assert content(at_b) == ["a: go"]
    assert request_of(at_b)["sender"] == a
    assert received("forms-default") == []
    assert status_text(task) == "b: a: go"
    assert artifacts(task) == [(a, "a: go"), (b, "b: a: go")]


@pytest.mark.anyio
async def test_sender_from_an_agent_goes_back_to_that_agent(ranch: RunningRanch) -> None:
    """2.3: A -> B, B answers `sender` -> the next hop is A, with sender = B."""
    task = await turn(ranch, "sendr", "question")
    assert task.status.state == COMPLETED
    trail = trail_of(task)
    assert route_of(task) == [
        ("sendr-a", "user", "sendr-b"),
        ("sendr-b", "sendr-a", "sendr-a"),
        ("sendr-a", "sendr-b", "user"),
    ]
    assert trail[1]["reason"] == "back to whoever asked"
    [at_b] = received("sendr-b")
    assert request_of(at_b)["sender"] == "sendr-a"
    assert status_text(task) == "a is done: sendr-b saw: a asks: question"


@pytest.mark.anyio
async def test_user_recipient_ends_the_turn(ranch: RunningRanch) -> None:
    """2.3: a reply naming `user` ends the turn; that reply is the result and no one else is called."""
    task = await turn(ranch, "ends", "just answer")
    assert task.status.state == COMPLETED
    assert route_of(task) == [("ends-a", "user", "user")]
    assert trail_of(task)[0]["reason"] == "done"
    assert status_text(task) == "ends-a answers"
    assert artifacts(task) == [("ends-a", "ends-a answers")]
    assert received("ends-b") == []


@pytest.mark.anyio
async def test_invalid_recipient_fallback_goes_to_default_agent_with_a_note(ranch: RunningRanch) -> None:
    """2.3: a non-member recipient (fallback) goes to the default agent with a note naming the bad id."""
    task = await turn(ranch, "inv", "do it", metadata={X_RECIPIENT: "inv-bad"})
    assert task.status.state == COMPLETED
    assert route_of(task) == [("inv-bad", "user", "inv-default"), ("inv-default", "inv-bad", "user")]
    assert "ghost-one" in trail_of(task)[0]["reason"]
    [at_default] = received("inv-default")
    parts = content(at_default)
    assert parts[0] == "inv-bad reply"
    assert len(parts) == 2 and "ghost-one" in parts[1]
    assert request_of(at_default)["sender"] == "inv-bad"
    assert status_text(task) == "inv default handled it"


@pytest.mark.anyio
async def test_invalid_recipient_from_the_default_agent_ends_the_turn_with_the_note(
    ranch: RunningRanch,
) -> None:
    """2.3: the default agent naming a non-member (fallback) ends the turn with its reply and the note."""
    task = await turn(ranch, "invd", "do it")
    assert task.status.state == COMPLETED
    assert route_of(task) == [("invd-default", "user", "user")]
    assert len(received("invd-default")) == 1
    assert received("invd-other") == []
    lines = [part.text for part in task.status.message.parts]
    assert lines[0] == "invd default reply"
    assert len(lines) == 2 and "ghost-two" in lines[1]


@pytest.mark.anyio
async def test_invalid_recipient_with_on_invalid_recipient_error_fails_the_task(ranch: RunningRanch) -> None:
    """2.3: with on_invalid_recipient: error, a non-member recipient ends FAILED naming the bad id."""
    task = await turn(ranch, "inverr", "do it")
    assert task.status.state == FAILED
    assert "ghost-three" in status_text(task)
    assert "ghost-three" in error_of(task)["message"]
    assert error_of(task)["type"] == "InvalidRecipient"
    assert artifacts(task) == [("inverr-a", "inverr reply")]
    assert received("inverr-b") == []
    # the hop that made the bad decision is part of the trail that is kept
    assert [hop["agent"] for hop in trail_of(task)] == ["inverr-a"]


@pytest.mark.anyio
async def test_self_routing_is_an_invalid_recipient(ranch: RunningRanch) -> None:
    """2.3: an agent naming itself is an invalid recipient: fallback to the default agent with a note."""
    task = await turn(ranch, "selfr", "loop me", metadata={X_RECIPIENT: "selfr-me"})
    assert task.status.state == COMPLETED
    assert route_of(task) == [("selfr-me", "user", "selfr-default"), ("selfr-default", "selfr-me", "user")]
    assert len(received("selfr-me")) == 1
    [at_default] = received("selfr-default")
    parts = content(at_default)
    assert parts[0] == "selfr-me reply"
    assert len(parts) == 2 and "itself" in parts[1] and "selfr-me" in parts[1]


@pytest.mark.anyio
async def test_no_decision_follows_the_static_route(ranch: RunningRanch) -> None:
    """2.3/2.4: a reply with no decision goes along the team's static route for that agent."""
    task = await turn(ranch, "static", "pipe", metadata={X_RECIPIENT: "static-a"})
    assert route_of(task)[0] == ("static-a", "user", "static-b")
    assert trail_of(task)[0]["reason"] == "static route"
    [at_b] = received("static-b")
    assert content(at_b) == ["static-a: pipe"]


@pytest.mark.anyio
async def test_no_decision_without_route_goes_to_the_default_agent(ranch: RunningRanch) -> None:
    """2.3: a non-default agent's reply with no decision and no static route goes to the default agent."""
    task = await turn(ranch, "static", "pipe", metadata={X_RECIPIENT: "static-b"})
    assert route_of(task) == [("static-b", "user", "static-d"), ("static-d", "static-b", "user")]
    [at_default] = received("static-d")
    assert content(at_default) == ["static-b: pipe"]


@pytest.mark.anyio
async def test_default_agent_deciding_nothing_ends_the_turn(ranch: RunningRanch) -> None:
    """2.3: the default agent's reply with no decision (and no static route) ends the turn."""
    pipeline = await turn(ranch, "static", "pipe", metadata={X_RECIPIENT: "static-a"})
    assert pipeline.status.state == COMPLETED
    assert route_of(pipeline) == [
        ("static-a", "user", "static-b"),
        ("static-b", "static-a", "static-d"),
        ("static-d", "static-b", "user"),
    ]
    assert status_text(pipeline) == "static-d: static-b: static-a: pipe"

    direct = await turn(ranch, "static", "hi")
    assert direct.status.state == COMPLETED
    assert route_of(direct) == [("static-d", "user", "user")]
    assert status_text(direct) == "static-d: hi"


@pytest.mark.anyio
async def test_handoffs_narrow_the_peers_offered_to_the_next_agent(ranch: RunningRanch) -> None:
    """1/2.3: `handoffs` in a decision narrows the next agent's agentCards (never including itself)."""
    task = await turn(ranch, "hand", "split")
    assert task.status.state == COMPLETED
    assert route_of(task) == [("hand-a", "user", "hand-b"), ("hand-b", "hand-a", "user")]
    [at_a] = received("hand-a")
    assert peer_ids(at_a) == ["hand-b", "hand-c", "hand-d"]  # no handoffs before the first hop
    [at_b] = received("hand-b")
    assert peer_ids(at_b) == ["hand-c"]


# -- section 2.5: hop limit ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_hop_limit_fails_naming_the_limit_and_the_trail_keeping_every_reply(
    ranch: RunningRanch,
) -> None:
    """2.5: two agents ping-ponging past max_hops end FAILED naming the limit and trail; replies stay."""
    task = await turn(ranch, "loop", "ping")
    assert task.status.state == FAILED
    error = status_text(task)
    assert "max_hops=3" in error
    assert "loop-a -> loop-b -> loop-a" in error
    assert error_of(task)["type"] == "HopLimitExceeded"
    assert route_of(task) == [
        ("loop-a", "user", "loop-b"),
        ("loop-b", "loop-a", "loop-a"),
        ("loop-a", "loop-b", "loop-b"),
    ]
    assert artifacts(task) == [
        ("loop-a", "loop-a turn"),
        ("loop-b", "loop-b turn"),
        ("loop-a", "loop-a turn"),
    ]
    assert len(received("loop-a")) == 2
    assert len(received("loop-b")) == 1  # the fourth hop is never sent


@pytest.mark.anyio
async def test_request_data_has_sender_hops_remaining_and_trail(ranch: RunningRanch) -> None:
    """1: each routing member gets sender, hopsRemaining (this hop included) and the trail so far."""
    task = await turn(ranch, "hops", "count")
    assert task.status.state == COMPLETED
    expected = {
        "hops-a": ("user", 5, []),
        "hops-b": ("hops-a", 4, ["hops-a"]),
        "hops-c": ("hops-b", 3, ["hops-a", "hops-b"]),
    }
    for agent, (sender, remaining, trail) in expected.items():
        [message] = received(agent)
        request = request_of(message)
        assert request["sender"] == sender, agent
        assert request["hopsRemaining"] == remaining, agent
        assert request.get("trail", []) == trail, agent
        assert list(message.extensions) == [URI], agent
        assert probes.CALLS[agent][0].extensions == frozenset({URI}), agent


# -- section 2.6: what the next agent sees -------------------------------------------------------------------


@pytest.mark.anyio
async def test_agent_reached_second_sees_the_users_request_in_the_context_part(ranch: RunningRanch) -> None:
    """2.6: a member reached second gets a context part with the user's request before the previous reply."""
    await turn(ranch, "ctx", "the original request")
    [at_b] = received("ctx-b")
    assert context_of(at_b) == f"{HEADER}\nuser: the original request"
    assert at_b.parts[0].metadata.fields[CONTEXT_PART_KEY].bool_value is True
    assert content(at_b) == ["ctx-a reply"]
    [at_d] = received("ctx-d")  # default history length: all it has not seen
    assert context_lines(at_d) == ["user: the original request", "ctx-a: ctx-a reply", "ctx-b: ctx-b reply"]
    assert content(at_d) == ["ctx-c reply"]


@pytest.mark.anyio
async def test_history_length_bounds_the_context_part(ranch: RunningRanch) -> None:
    """2.6: history_length: 1 shows only the newest entry the agent has not seen (before its content)."""
    await turn(ranch, "ctx", "the original request")
    [at_c] = received("ctx-c")
    assert context_lines(at_c) == ["ctx-a: ctx-a reply"]
    assert content(at_c) == ["ctx-b reply"]


# -- section 2.8: failures -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_failing_member_fails_the_task_naming_the_agent(ranch: RunningRanch) -> None:
    """2.8: a member that raises ends the task FAILED naming it; earlier replies and trail are kept."""
    task = await turn(ranch, "failing", "try")
    assert task.status.state == FAILED
    assert "fail-b" in status_text(task)
    assert "boom in fail-b" in status_text(task)
    assert error_of(task)["agent"] == "fail-b"
    assert artifacts(task) == [("fail-a", "fail-a reply")]
    assert route_of(task)[:1] == [("fail-a", "user", "fail-b")]


@pytest.mark.anyio
async def test_member_timeout_fails_the_task_naming_the_agent_in_time(ranch: RunningRanch) -> None:
    """2.8: a member slower than its `timeout` ends the task FAILED naming it, within about the timeout."""
    task = await turn(ranch, "slow", "hurry")  # slow-b would answer after 5 s; its 0.5 s timeout ends the hop
    assert task.status.state == FAILED
    assert "slow-b" in status_text(task)
    assert "timeout" in status_text(task)
    assert error_of(task)["agent"] == "slow-b"
    assert error_of(task)["type"] == "AgentTimeout"
    assert artifacts(task) == [("slow-a", "slow-a reply")]
    assert route_of(task)[:1] == [("slow-a", "user", "slow-b")]


# -- section 3: multi-turn -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_multi_turn_same_context_continues_showing_only_unseen(ranch: RunningRanch) -> None:
    """3: a second turn in the same contextId continues; members see only what is new to them."""
    context_id = str(uuid.uuid4())
    first = await turn(ranch, "multi", "first question", context_id=context_id)
    assert first.status.state == COMPLETED
    assert first.context_id == context_id
    second = await turn(ranch, "multi", "second question", context_id=context_id)
    assert second.status.state == COMPLETED
    assert second.context_id == context_id
    assert second.id != first.id
    assert status_text(second) == "multi-b two"

    a1, a2 = received("multi-a")
    assert context_of(a1) is None
    assert content(a2) == ["second question"]
    assert "multi-b: multi-b one" in context_lines(a2)  # new to multi-a
    assert "user: first question" not in context_lines(a2)  # already seen

    b1, b2 = received("multi-b")
    assert context_lines(b1) == ["user: first question"]
    assert content(b2) == ["multi-a two"]
    assert "user: second question" in context_lines(b2)
    assert "user: first question" not in context_lines(b2)
    assert "multi-a: multi-a one" not in context_lines(b2)  # it got that as content in turn 1


@pytest.mark.anyio
async def test_member_is_not_shown_its_own_reply_as_new(ranch: RunningRanch) -> None:
    """2.6: the context part holds only what the member has not seen: never its own earlier reply."""
    context_id = str(uuid.uuid4())
    await turn(ranch, "own", "q1", context_id=context_id)
    second = await turn(ranch, "own", "q2", context_id=context_id)
    assert status_text(second) == "own-a answers q2"
    first_call, second_call = received("own-a")
    assert content(second_call) == ["q2"]
    assert context_lines(second_call) == []  # it saw q1 and wrote "own-a answers q1" itself


# -- section 3: streaming ------------------------------------------------------------------------------------


def kind_of(response: StreamResponse) -> str:
    kind: str | None = response.WhichOneof("payload")
    assert kind is not None
    return kind


@pytest.mark.anyio
async def test_streaming_yields_task_then_working_and_artifact_per_hop_then_final(
    ranch: RunningRanch,
) -> None:
    """3: stream = Task, then per hop WORKING (agent, reason) + its reply artifact, then the final status."""
    async with sdk_client(ranch.agent_url("stream"), streaming=True) as client:
        events = await send(client, user_message("stream it"))
    assert [kind_of(e) for e in events] == [
        "task",
        "status_update",
        "artifact_update",
        "status_update",
        "artifact_update",
        "status_update",
        "artifact_update",
        "status_update",
    ]
    task = events[0].task
    working = [events[i].status_update for i in (1, 3, 5)]
    replies = [events[i].artifact_update for i in (2, 4, 6)]
    final = events[7].status_update
    updates: list[TaskStatusUpdateEvent | TaskArtifactUpdateEvent] = [*working, *replies, final]
    assert task.context_id and all(e.context_id == task.context_id for e in updates)
    assert all(e.task_id == task.id for e in updates)

    expected = [("stream-a", "default agent"), ("stream-b", "b next"), ("stream-c", "c next")]
    for update, (agent, reason) in zip(working, expected, strict=True):
        assert update.status.state == WORKING
        text = "\n".join(p.text for p in update.status.message.parts)
        assert agent in text and reason in text, text
    assert [(u.artifact.name, u.artifact.parts[0].text) for u in replies] == [
        ("stream-a", "stream-a reply"),
        ("stream-b", "stream-b reply"),
        ("stream-c", "stream-c reply"),
    ]
    assert final.status.state == COMPLETED
    assert [p.text for p in final.status.message.parts] == ["stream-c reply"]
    trail = MessageToDict(final.metadata)[URI]["trail"]
    assert [(h["agent"], h["sender"], h["recipient"], h["reason"]) for h in trail] == [
        ("stream-a", "user", "stream-b", "b next"),
        ("stream-b", "stream-a", "stream-c", "c next"),
        ("stream-c", "stream-b", "user", "all done"),
    ]


# -- section 3: GetTask on team tasks ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_get_task_returns_the_settled_team_task(ranch: RunningRanch) -> None:
    """3: once SendMessage has answered, GetTask on the team task returns that same final task and trail."""
    async with sdk_client(ranch.agent_url("store")) as client:
        for index in range(8):
            [response] = await send(client, user_message(f"turn {index}"))
            answered = response.task
            assert answered.status.state == COMPLETED
            stored = await client.get_task(GetTaskRequest(id=answered.id))
            assert (TaskState.Name(stored.status.state), index) == ("TASK_STATE_COMPLETED", index)
            assert status_text(stored) == f"turn {index}"
            assert trail_of(stored) == trail_of(answered)
            assert artifacts(stored) == [("store-echo", f"turn {index}")]
