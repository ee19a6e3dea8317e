"""The routing contract over real HTTP: seed 002's scenarios and what of docs/routing.md crosses the wire.

One ranch server for the module, on 127.0.0.1, with one small team per scenario. Teams are
called with the official a2a-sdk client; `kind: python` probes (tests/_support/probes.py) record
every message they receive, so each test checks both what the caller got back (the Task, its
artifacts and trail) and what every member was shown (content, context part, request data).

The Router's rules one by one (recipient forms, invalid recipients, static routes, handoffs,
request data, the context window, timeouts) are proven in process in routing/test_router.py;
this file keeps the seed scenarios and what a caller sends or reads over HTTP: the first
recipient in the message's metadata, the failed task's error and trail, a conversation over
several SendMessage calls, streaming and GetTask.

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

  # -- section 2.5: hop limit
  - {id: loop-a, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "loop-a turn", route: loop-b}}
  - {id: loop-b, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "loop-b turn", route: loop-a}}

  # -- section 2.8: failures
  - {id: fail-a, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {reply: "fail-a reply", route: fail-b}}
  - {id: fail-b, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {fail: "boom in fail-b"}}

  # -- section 3: multi-turn by contextId
  - {id: multi-a, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {replies: ["multi-a one", "multi-a two"], route: multi-b}}
  - {id: multi-b, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {replies: ["multi-b one", "multi-b two"], route: user}}

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
  - {id: loop, members: [loop-a, loop-b], default_agent: loop-a, max_hops: 3}
  - {id: failing, members: [fail-a, fail-b], default_agent: fail-a}
  - {id: multi, members: [multi-a, multi-b], default_agent: multi-a}
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


# -- section 2.6: what the next agent sees -------------------------------------------------------------------


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
