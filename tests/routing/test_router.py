"""The Router in process: a `Team` built here, its members rules, echo and scripted probes.

Each test is one or two user turns through `Team.run`, no server and no socket, so it takes
milliseconds. `routing/test_contract.py` keeps the same rules over HTTP with the a2a-sdk client
(docs/routing.md): what a caller sees on the wire. Here: what the Router decides, what each
member is shown, and what the turn's events say.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from a2a.types import (
    Message,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.json_format import MessageToDict

from _support.probes import CALLS, RECEIVED, Probe
from _support.sdk import user_message
from ranch import (
    CLIENT_ROUTING_URI,
    Agent,
    AgentInfo,
    Call,
    Event,
    RoutingDecision,
    Team,
    read_routing_request,
    reply,
    text_of,
)
from ranch.agents.base import CONTEXT_PART_KEY
from ranch.agents.echo import EchoAgent
from ranch.agents.loader import PythonAgent
from ranch.agents.rules import Rule, RulesAgent
from ranch.routing.context import HEADER
from ranch.routing.router import HOP_KEY
from ranch.wire.client_routing import X_RECIPIENT, declaration

pytestmark = pytest.mark.anyio

COMPLETED = TaskState.TASK_STATE_COMPLETED
FAILED = TaskState.TASK_STATE_FAILED
WORKING = TaskState.TASK_STATE_WORKING
INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
TURN_LIMIT = 5.0
"""Seconds any one turn here may take: a hang fails the test instead of the suite."""

# -- members ------------------------------------------------------------------------------------


def info(agent_id: str, routes: bool) -> AgentInfo:
    return AgentInfo(id=agent_id, name=agent_id, extensions=[declaration()] if routes else [])


def probe(agent_id: str, *, routes: bool = True, **options: Any) -> Agent:
    """A scripted member (tests/_support/probes.py) that records what reaches it in RECEIVED."""
    return PythonAgent(info(agent_id, routes), Probe(agent_id, **options).run)


def rules(agent_id: str, *table: tuple[str | None, str, str | None]) -> Agent:
    """ranch's `rules` kind: (match, reply, route) rows, the first match wins."""
    rows = [Rule(re.compile(m) if m else None, r, route, None) for m, r, route in table]
    return RulesAgent(info(agent_id, True), rows)


def echo(agent_id: str) -> Agent:
    return EchoAgent(info(agent_id, False))


def team(*members: Agent, default: str | None = None, **policies: Any) -> Team:
    by_id = {member.id: member for member in members}
    return Team(id="team", members=by_id, default_agent=default or members[0].id, **policies)


class Asker(Agent):
    """Asks the caller a question first (INPUT_REQUIRED), answers the user once it has the answer."""

    def __init__(self, agent_id: str) -> None:
        self.id = agent_id
        self.asked: set[str] = set()

    async def info(self) -> AgentInfo:
        return info(self.id, True)

    async def run(self, message: Message, call: Call) -> AsyncGenerator[Event, None]:
        RECEIVED[self.id].append(message)
        if message.context_id not in self.asked:
            self.asked.add(message.context_id)
            question = reply(message, "Which city?")
            status = TaskStatus(state=INPUT_REQUIRED, message=question)
            yield Task(id="asker-task", context_id=message.context_id, status=status)
            return
        yield reply(message, f"Sunny in {text_of(message)}", RoutingDecision(recipient="user"))


class Blocker(Agent):
    """Waits until canceled on its first call; answers at once after that."""

    def __init__(self, agent_id: str) -> None:
        self.id = agent_id
        self.started = anyio.Event()
        self.closed = False

    async def info(self) -> AgentInfo:
        return info(self.id, False)

    async def run(self, message: Message, call: Call) -> AsyncGenerator[Event, None]:
        if self.started.is_set():
            yield reply(message, "answered")
            return
        try:
            self.started.set()
            await anyio.sleep_forever()
            yield reply(message, "never")
        finally:
            self.closed = True


# -- one turn and what it says ------------------------------------------------------------------


@dataclass
class Turn:
    """The events of one user turn, read the way a caller reads the team task."""

    events: list[Event]

    @property
    def final(self) -> TaskStatusUpdateEvent:
        last = self.events[-1]
        assert isinstance(last, TaskStatusUpdateEvent)
        return last

    @property
    def state(self) -> TaskState:
        return self.final.status.state

    @property
    def lines(self) -> list[str]:
        return [part.text for part in self.final.status.message.parts]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def data(self) -> dict[str, Any]:
        return dict(MessageToDict(self.final.metadata)[CLIENT_ROUTING_URI])

    @property
    def route(self) -> list[tuple[str, str, str]]:
        return [(hop["agent"], hop["sender"], hop["recipient"]) for hop in self.data["trail"]]

    @property
    def reasons(self) -> list[str]:
        return [hop["reason"] for hop in self.data["trail"]]

    @property
    def artifacts(self) -> list[tuple[str, str]]:
        updates = [e for e in self.events if isinstance(e, TaskArtifactUpdateEvent)]
        return [(u.artifact.name, "\n".join(p.text for p in u.artifact.parts)) for u in updates]


async def turn(squad: Team, text: str = "hello", *, owner: str = "", **fields: Any) -> Turn:
    """One user message through `squad`: every event it yields, the final status last."""
    fields.setdefault("context_id", "ctx-1")
    with anyio.fail_after(TURN_LIMIT):
        events = [event async for event in squad.run(user_message(text, **fields), Call(owner=owner))]
    return Turn(events)


def received(agent_id: str) -> list[Message]:
    return list(RECEIVED[agent_id])


def content(message: Message) -> list[str]:
    """The text of every part except the Router's context part."""
    return [p.text for p in message.parts if CONTEXT_PART_KEY not in p.metadata.fields]


def context_lines(message: Message) -> list[str]:
    """The entries of the context part (`speaker: text`); it comes first, under its header."""
    marked = [p for p in message.parts if CONTEXT_PART_KEY in p.metadata.fields]
    if not marked:
        return []
    assert marked == [message.parts[0]], "one context part, first"
    text: str = marked[0].text
    header, *lines = text.split("\n")
    assert header == HEADER
    return lines


def request_of(message: Message) -> dict[str, Any]:
    data = MessageToDict(message.metadata).get(CLIENT_ROUTING_URI)
    assert isinstance(data, dict), "no routing request data"
    return dict(data)


# -- 2.1: the first recipient -------------------------------------------------------------------


async def test_the_default_agent_answers_first_and_deciding_nothing_ends_the_turn() -> None:
    result = await turn(team(echo("desk"), probe("other")), "hi there")
    assert result.state == COMPLETED
    assert result.route == [("desk", "user", "user")]
    assert result.reasons == ["default agent answered"]
    assert result.text == "hi there"
    assert received("other") == []


@pytest.mark.parametrize(
    "metadata",
    [{CLIENT_ROUTING_URI: {"recipient": "smart"}}, {X_RECIPIENT: "smart"}],
    ids=["uri", "x-recipient"],
)
async def test_a_recipient_named_in_the_message_goes_first(metadata: dict[str, Any]) -> None:
    squad = team(probe("desk"), probe("smart", reply="smart: {text}", route="user"))
    result = await turn(squad, "ask the smart one", metadata=metadata)
    assert result.route == [("smart", "user", "user")]
    assert result.text == "smart: ask the smart one"
    assert received("desk") == []


@pytest.mark.parametrize(
    "metadata",
    [
        {X_RECIPIENT: "ghost"},
        {X_RECIPIENT: "user"},
        {X_RECIPIENT: "team"},  # the team itself
        {CLIENT_ROUTING_URI: {"recipient": "sender"}},
        {CLIENT_ROUTING_URI: {"recipient": {"type": "agent", "id": "ghost"}}},
    ],
    ids=["unknown", "user", "the-team", "sender", "object-unknown"],
)
async def test_a_first_recipient_that_is_no_member_falls_back_to_the_default_agent(
    metadata: dict[str, Any],
) -> None:
    squad = team(probe("desk", reply="desk: {text}", route="user"), probe("other"))
    result = await turn(squad, "hi", metadata=metadata)
    assert result.route == [("desk", "user", "user")]
    assert [event.status.message.parts[0].text for event in result.events[:1]] == [
        "desk is working (hop 1: default agent)"
    ]


# -- 2.3: the recipient an agent names ----------------------------------------------------------


async def test_a_peer_recipient_gets_the_reply_as_its_content() -> None:
    squad = team(
        probe("desk", reply="over to you", route="writer", reason="needs words"),
        probe("writer", reply="written: {text}", route="user", reason="done"),
    )
    result = await turn(squad, "write me a poem")
    assert result.route == [("desk", "user", "writer"), ("writer", "desk", "user")]
    assert result.reasons == ["needs words", "done"]
    assert result.text == "written: over to you"
    [at_writer] = received("writer")
    assert content(at_writer) == ["over to you"]


async def test_user_ends_the_turn_with_that_reply_and_no_one_else_is_called() -> None:
    squad = team(probe("desk", reply="all done", route="user", reason="done"), probe("idle"))
    result = await turn(squad)
    assert (result.state, result.text, result.route) == (COMPLETED, "all done", [("desk", "user", "user")])
    assert result.artifacts == [("desk", "all done")]
    assert received("idle") == []


async def test_sender_goes_back_to_the_agent_whose_reply_it_answered() -> None:
    squad = team(
        rules("desk", ("^b's answer", "thanks", "user"), (None, "ask b", "b")),
        probe("b", reply="b's answer", route="sender"),
    )
    result = await turn(squad)
    assert result.route == [("desk", "user", "b"), ("b", "desk", "desk"), ("desk", "b", "user")]
    assert result.text == "thanks"


@pytest.mark.parametrize("form", ["uri", "x-recipient", "object", "task"])
async def test_every_decision_form_routes(form: str) -> None:
    options = {"form": form} if form != "task" else {"task": True}
    squad = team(probe("a", reply="a says", route="b", **options), probe("b", reply="b ends", route="user"))
    result = await turn(squad)
    assert result.route == [("a", "user", "b"), ("b", "a", "user")]
    assert result.text == "b ends"


async def test_rules_decide_like_any_routing_member() -> None:
    squad = team(
        rules("triage", ("(?i)paper", "Routing: {text}", "research"), (None, "I answer: {text}", "user")),
        probe("research", reply="notes on {text}", route="user"),
    )
    assert (await turn(squad, "a paper please")).route == [
        ("triage", "user", "research"),
        ("research", "triage", "user"),
    ]
    assert (await turn(squad, "small talk", context_id="ctx-2")).text == "I answer: small talk"


# -- 2.3: invalid recipients --------------------------------------------------------------------


async def test_an_invalid_recipient_goes_to_the_default_agent_with_a_note() -> None:
    squad = team(
        probe("desk", reply="desk handled it", route="user"), probe("bad", reply="bad reply", route="ghost")
    )
    result = await turn(squad, metadata={X_RECIPIENT: "bad"})
    assert result.state == COMPLETED
    assert result.route == [("bad", "user", "desk"), ("desk", "bad", "user")]
    assert result.reasons[0] == "invalid recipient 'ghost', fallback"
    [at_desk] = received("desk")
    assert content(at_desk) == [
        "bad reply",
        "[ranch] agent 'bad' named 'ghost', which is not a member of team 'team' as the next recipient; "
        "the turn went back to 'desk'.",
    ]
    assert request_of(at_desk)["sender"] == "bad"


async def test_an_invalid_recipient_from_the_default_agent_ends_the_turn_with_the_note() -> None:
    squad = team(probe("desk", reply="desk reply", route="ghost"), probe("other"))
    result = await turn(squad)
    assert result.state == COMPLETED
    assert result.route == [("desk", "user", "user")]
    assert result.lines[0] == "desk reply"
    assert result.lines[1].endswith("the turn ended.") and "'ghost'" in result.lines[1]
    assert received("other") == []


async def test_an_invalid_recipient_under_the_error_policy_fails_and_keeps_the_hop() -> None:
    squad = team(probe("a", reply="a reply", route="ghost"), probe("b"), on_invalid_recipient="error")
    result = await turn(squad)
    assert result.state == FAILED
    assert result.data["error"]["type"] == "InvalidRecipient"
    assert "'ghost'" in result.text
    assert result.artifacts == [("a", "a reply")]
    assert [hop["agent"] for hop in result.data["trail"]] == ["a"]
    assert received("b") == []


async def test_naming_itself_is_an_invalid_recipient() -> None:
    squad = team(probe("desk", reply="desk ends", route="user"), probe("me", reply="me again", route="me"))
    result = await turn(squad, metadata={X_RECIPIENT: "me"})
    assert result.route == [("me", "user", "desk"), ("desk", "me", "user")]
    assert "named itself" in content(received("desk")[0])[1]


# -- 2.3/2.4: no decision -----------------------------------------------------------------------


async def test_no_decision_follows_the_static_route_then_the_default_agent() -> None:
    squad = team(echo("d"), probe("a", routes=False, reply="a: {text}"), echo("b"), routes={"a": "b"})
    result = await turn(squad, "pipe", metadata={X_RECIPIENT: "a"})
    assert result.route == [("a", "user", "b"), ("b", "a", "d"), ("d", "b", "user")]
    assert result.reasons == [
        "static route",
        "no decision; back to the default agent",
        "default agent answered",
    ]
    assert result.text == "a: pipe"


async def test_a_static_route_to_user_ends_the_turn() -> None:
    squad = team(echo("d"), echo("a"), routes={"a": "user"})
    result = await turn(squad, "straight out", metadata={X_RECIPIENT: "a"})
    assert result.route == [("a", "user", "user")]


# -- 2.5: the hop limit -------------------------------------------------------------------------


async def test_the_hop_limit_fails_naming_the_limit_and_the_trail_and_sends_no_more() -> None:
    squad = team(probe("a", reply="a turn", route="b"), probe("b", reply="b turn", route="a"), max_hops=3)
    result = await turn(squad, "ping")
    assert result.state == FAILED
    assert result.text == "team 'team' reached its hop limit (max_hops=3); trail: a -> b -> a -> b"
    assert result.data["error"]["type"] == "HopLimitExceeded"
    assert result.route == [("a", "user", "b"), ("b", "a", "a"), ("a", "b", "b")]
    assert result.artifacts == [("a", "a turn"), ("b", "b turn"), ("a", "a turn")]
    assert (len(received("a")), len(received("b"))) == (2, 1)


# -- 1 and 2.6: what each member is shown -------------------------------------------------------


async def test_routing_members_get_sender_hops_remaining_the_trail_and_their_peers() -> None:
    squad = team(
        probe("a", route="b"), probe("b", route="c"), probe("c", route="user"), echo("plain"), max_hops=5
    )
    await turn(squad)
    expected = {"a": ("user", 5, []), "b": ("a", 4, ["a"]), "c": ("b", 3, ["a", "b"])}
    for agent, (sender, remaining, trail) in expected.items():
        [message] = received(agent)
        request = read_routing_request(message)
        assert request is not None, agent
        assert (request.sender, request.hops_remaining, request.trail or []) == (sender, remaining, trail)
        assert [card.id for card in request.agent_cards] == [
            m for m in ("a", "b", "c", "plain") if m != agent
        ]
        assert [card.supports_client_routing for card in request.agent_cards].count(False) == 1
        assert list(message.extensions) == [CLIENT_ROUTING_URI]
        assert CALLS[agent][0].extensions == frozenset({CLIENT_ROUTING_URI})


async def test_members_without_the_extension_never_see_it() -> None:
    squad = team(echo("desk"), probe("a", route="plain"), probe("plain", routes=False, reply="plain answer"))
    result = await turn(squad, "hi", metadata={CLIENT_ROUTING_URI: {"recipient": "a"}, X_RECIPIENT: "a"})
    assert result.route == [("a", "user", "plain"), ("plain", "a", "desk"), ("desk", "plain", "user")]
    [at_plain] = received("plain")
    assert MessageToDict(at_plain.metadata) == {}
    assert list(at_plain.extensions) == []
    assert content(at_plain) == ["a saw: hi"]


async def test_handoffs_narrow_the_peers_offered_to_the_next_agent() -> None:
    squad = team(
        probe("a", route="b", handoffs=["c"]), probe("b", route="user"), probe("c"), probe("d", routes=False)
    )
    result = await turn(squad)
    assert result.route == [("a", "user", "b"), ("b", "a", "user")]
    peers = {
        agent: [card["id"] for card in request_of(received(agent)[0])["agentCards"]] for agent in ("a", "b")
    }
    assert peers == {"a": ["b", "c", "d"], "b": ["c"]}


async def test_the_agent_reached_second_sees_the_request_in_a_context_part_bounded_by_history_length() -> (
    None
):
    short = probe("c", reply="c reply", route="d")
    short.history_length = 1
    squad = team(
        probe("a", reply="a reply", route="b"),
        probe("b", reply="b reply", route="c"),
        short,
        probe("d", route="user"),
    )
    await turn(squad, "the original request")
    [at_b], [at_c], [at_d] = received("b"), received("c"), received("d")
    assert context_lines(at_b) == ["user: the original request"]
    assert at_b.parts[0].metadata.fields[CONTEXT_PART_KEY].bool_value is True
    assert content(at_b) == ["a reply"]
    assert context_lines(at_c) == ["a: a reply"]
    assert context_lines(at_d) == ["user: the original request", "a: a reply", "b: b reply"]
    assert content(at_d) == ["c reply"]


async def test_a_second_turn_shows_each_member_only_what_is_new_to_it() -> None:
    squad = team(
        probe("a", replies=["a one", "a two"], route="b"),
        probe("b", replies=["b one", "b two"], route="user"),
    )
    await turn(squad, "first question")
    second = await turn(squad, "second question")
    assert second.text == "b two"
    a1, a2 = received("a")
    assert context_lines(a1) == []
    assert content(a2) == ["second question"]
    assert context_lines(a2) == ["b: b one"]  # never its own reply, never what it saw
    b1, b2 = received("b")
    assert context_lines(b1) == ["user: first question"]
    assert context_lines(b2) == ["user: second question"]


async def test_another_owner_with_the_same_context_id_starts_its_own_conversation() -> None:
    squad = team(probe("a", route="b"), probe("b", route="user"))
    await turn(squad, "alice's secret", owner="alice")
    await turn(squad, "bob's question", owner="bob")
    assert [context_lines(m) for m in received("b")] == [["user: alice's secret"], ["user: bob's question"]]


# -- 2.7: input required ------------------------------------------------------------------------


async def test_a_member_asking_for_input_ends_the_turn_and_gets_the_follow_up() -> None:
    asker = Asker("weather")
    squad = team(probe("desk", reply="over to weather", route="weather"), asker)
    asked = await turn(squad, "what's the weather?")
    assert asked.state == INPUT_REQUIRED
    assert asked.text == "Which city?"
    assert asked.route == [("desk", "user", "weather"), ("weather", "desk", "user")]
    assert asked.reasons[1] == "asked for input"

    answered = await turn(squad, "Lisbon")
    assert answered.state == COMPLETED
    assert answered.route == [("weather", "user", "user")]
    assert answered.text == "Sunny in Lisbon"
    assert len(received("desk")) == 1  # the follow-up went straight back to the member that asked
    assert "answering its question" in answered.events[0].status.message.parts[0].text

    elsewhere = await turn(squad, "hello", context_id="ctx-other")
    assert elsewhere.route[0][0] == "desk"


# -- 2.8: failures and cancellation -------------------------------------------------------------


async def test_a_failing_member_fails_the_turn_naming_it_and_earlier_replies_stay() -> None:
    squad = team(probe("a", reply="a reply", route="b"), probe("b", fail="boom in b"))
    result = await turn(squad)
    assert result.state == FAILED
    assert result.text == "agent 'b': RuntimeError: boom in b"
    assert result.data["error"] == {"type": "AgentError", "message": result.text, "agent": "b"}
    assert result.artifacts == [("a", "a reply")]


async def test_a_member_past_its_timeout_fails_the_turn_naming_it() -> None:
    slow = probe("slow", sleep=60)
    slow.timeout = 0.05
    squad = team(probe("a", reply="a reply", route="slow"), slow)
    result = await turn(squad)
    assert result.state == FAILED
    assert result.text == "agent 'slow': no answer within its timeout of 0.05s"
    assert (result.data["error"]["type"], result.data["error"]["agent"]) == ("AgentTimeout", "slow")
    assert result.artifacts == [("a", "a reply")]


async def test_canceling_a_turn_closes_the_member_and_frees_the_conversation() -> None:
    blocker = Blocker("slow")
    squad = team(blocker)
    seen: list[Event] = []

    async def run_turn() -> None:
        async for event in squad.run(user_message("wait", context_id="ctx-1"), Call()):
            seen.append(event)

    with anyio.fail_after(TURN_LIMIT):
        async with anyio.create_task_group() as group:
            group.start_soon(run_turn)
            await blocker.started.wait()
            group.cancel_scope.cancel()
    assert blocker.closed
    assert [type(event) for event in seen] == [TaskStatusUpdateEvent]  # WORKING, and nothing after it
    assert seen[0].status.state == WORKING
    again = await turn(squad, "once more")  # the conversation's lock was released
    assert (again.state, again.text) == (COMPLETED, "answered")


# -- the turn's events --------------------------------------------------------------------------


async def test_each_hop_is_a_working_status_then_an_artifact_carrying_its_record() -> None:
    squad = team(
        probe("a", reply="a says", route="b", reason="b knows"), probe("b", reply="b ends", route="user")
    )
    result = await turn(squad)
    kinds = [
        (type(e).__name__, e.status.state if isinstance(e, TaskStatusUpdateEvent) else None)
        for e in result.events
    ]
    assert kinds == [
        ("TaskStatusUpdateEvent", WORKING),
        ("TaskArtifactUpdateEvent", None),
        ("TaskStatusUpdateEvent", WORKING),
        ("TaskArtifactUpdateEvent", None),
        ("TaskStatusUpdateEvent", COMPLETED),
    ]
    working = [MessageToDict(e.status.message.metadata)[HOP_KEY] for e in result.events[0::2][:2]]
    assert working == [
        {"agent": "a", "sender": "user", "reason": "default agent", "hop": 1},
        {"agent": "b", "sender": "a", "reason": "b knows", "hop": 2},
    ]
    records = [MessageToDict(e.artifact.metadata)[HOP_KEY] for e in result.events[1::2][:2]]
    assert [(r["agent"], r["recipient"], r["hop"]) for r in records] == [("a", "b", 1), ("b", "user", 2)]
    assert all(r["ms"] >= 0 for r in records)
    task_ids = {e.task_id for e in result.events}
    assert len(task_ids) == 1 and "" not in task_ids
