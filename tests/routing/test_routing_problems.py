"""Malformed routing data is reported, not swallowed (issue 35 item 5, docs/routing.md "Malformed
routing data").

A member whose answer carries `metadata[URI].recipient = 42`, a field of a type the contract does
not allow, or `handoffs` naming ids its team does not know: the hop's trail entry has a `problem`
naming it, the turn's next message carries a `[ranch]` note saying the same, and the hop's span has
`ranch.routing.problem`. The turn itself goes on as the contract says for what could be read.

In process first (a `Team` of scripted members), then over HTTP with official a2a-sdk peers
answering the malformed data (tests/_support/peers.py), the team served by `ranch serve`'s app.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import anyio
import pytest
from a2a.types import Message, Task, TaskState, TaskStatusUpdateEvent
from google.protobuf.json_format import MessageToDict
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from _support.hubkit import serve_ranch
from _support.peers import running_peer
from _support.probes import RECEIVED, Probe
from _support.sdk import sdk_client, send, trail_of, user_message
from ranch import AgentInfo, Call, Event, Team, reply
from ranch.agents.base import CONTEXT_PART_KEY
from ranch.agents.loader import PythonAgent
from ranch.wire import client_routing
from ranch.wire.client_routing import URI, X_RECIPIENT, declaration

COMPLETED = TaskState.TASK_STATE_COMPLETED
TURN_LIMIT = 5.0
"""Seconds any one in-process turn may take: a hang fails the test instead of the suite."""

SCHEMA = "schema.json#/$defs/response/properties"
"""Where the extension's schema document checks each field of the response data."""
RECIPIENT_42 = f"recipient is 42, not a string (ignored; {SCHEMA}/recipient/anyOf)"
NOTE_42 = f"[ranch] desk's routing data: {RECIPIENT_42}."
GHOST = "handoffs names 'ghost', not a member of team 'team' (left out)"


# -- members and turns ----------------------------------------------------------------------------


def info(agent_id: str) -> AgentInfo:
    return AgentInfo(id=agent_id, name=agent_id, extensions=[declaration()])


def probe(agent_id: str, **options: Any) -> PythonAgent:
    """A scripted routing member (tests/_support/probes.py); what reaches it is in RECEIVED."""
    return PythonAgent(info(agent_id), Probe(agent_id, **options).run)


def answering(agent_id: str, text: str, data: Any) -> PythonAgent:
    """A routing member whose every answer carries `data` as its `metadata[URI]`, whatever it is."""

    async def run(message: Message, call: Call) -> AsyncGenerator[Event, None]:
        RECEIVED[agent_id].append(message)
        answer = reply(message, text)
        answer.metadata.update({URI: data})
        yield answer

    return PythonAgent(info(agent_id), run)


def team(*members: PythonAgent, **policies: Any) -> Team:
    return Team(id="team", members={m.id: m for m in members}, default_agent=members[0].id, **policies)


async def final_data(squad: Team) -> tuple[dict[str, Any], list[str]]:
    """One user turn: the final status's routing data and the text of its message's parts."""
    with anyio.fail_after(TURN_LIMIT):
        events = [event async for event in squad.run(user_message("hello", context_id="c1"), Call())]
    final = events[-1]
    assert isinstance(final, TaskStatusUpdateEvent)
    data = dict(MessageToDict(final.metadata)[URI])
    assert final.status.state == COMPLETED, data
    return data, [part.text for part in final.status.message.parts]


def content(message: Message) -> list[str]:
    """The text of every part except the Router's context part."""
    return [part.text for part in message.parts if CONTEXT_PART_KEY not in part.metadata.fields]


def peer_ids(message: Message) -> list[str]:
    return [card["id"] for card in MessageToDict(message.metadata)[URI]["agentCards"]]


def hop_problems(finished: tuple[ReadableSpan, ...]) -> dict[str, Any]:
    """Each hop span's agent and its `ranch.routing.problem` (None: the attribute is absent)."""
    hops = [span for span in finished if span.name.startswith("ranch.hop")]
    return {
        str((span.attributes or {})["ranch.agent"]): (span.attributes or {}).get("ranch.routing.problem")
        for span in hops
    }


# -- the wire helper: what a reply's routing data comes to ----------------------------------------


def agent_message(metadata: dict[str, Any]) -> Message:
    message = Message(message_id="m1")
    message.metadata.update(metadata)
    return message


@pytest.mark.parametrize(
    ("metadata", "recipient", "problem"),
    [
        ({URI: {"recipient": "writer", "reason": "ready"}}, "writer", None),
        ({URI: {"recipient": {"type": "user"}}}, "user", None),
        ({X_RECIPIENT: "writer"}, "writer", None),
        ({URI: {"recipient": 42}}, None, RECIPIENT_42),
        (
            {URI: {"recipient": ""}},
            None,
            f'recipient is "", not an id (ignored; {SCHEMA}/recipient/anyOf)',
        ),
        (
            {URI: {"recipient": {"type": "robot"}}},
            None,
            f'recipient is {{"type": "robot"}}, not a recipient (ignored; {SCHEMA}/recipient/anyOf)',
        ),
        (
            {URI: {"recipient": "writer", "reason": 7}},
            "writer",
            f"reason is 7, not a string (ignored; {SCHEMA}/reason/type)",
        ),
        (
            {URI: {"recipient": "writer", "handoffs": "critic"}},
            "writer",
            f'handoffs is "critic", not a list of ids (ignored; {SCHEMA}/handoffs/type)',
        ),
        (
            {URI: {"recipient": "writer", "handoffs": ["critic", 3]}},
            "writer",
            f"handoffs holds 3, not an id (left out; {SCHEMA}/handoffs/items/type)",
        ),
        (
            {URI: {"recipient": "user", "usage": 12}},
            "user",
            f"usage is 12, not an object of token counts (ignored; {SCHEMA}/usage/type)",
        ),
        (
            {URI: {"recipient": "user", "usage": {"totalTokens": "many"}}},
            "user",
            'usage.totalTokens is "many", not a number '
            f"(ignored; {SCHEMA}/usage/properties/totalTokens/type)",
        ),
        (
            {URI: "writer"},
            None,
            'the routing data is "writer", not an object (ignored; schema.json#/$defs/response/type)',
        ),
        (
            {X_RECIPIENT: 42},
            None,
            "x-recipient is 42, not a recipient id (ignored; schema.json#/$defs/recipient/anyOf)",
        ),
        ({URI: {"recipient": 42}, X_RECIPIENT: "writer"}, "writer", RECIPIENT_42),
    ],
)
def test_reading_a_reply_names_each_field_of_the_wrong_type(
    metadata: dict[str, Any], recipient: str | None, problem: str | None
) -> None:
    """What is read is what was read before (a bad field is ignored); what was wrong is named."""
    decision, found = client_routing.read_checked(agent_message(metadata))
    assert (decision.recipient if decision is not None else None) == recipient
    assert found == problem


def test_a_task_reply_names_the_problems_met_before_its_decision() -> None:
    """The status message is read first: its bad recipient is named though the task's own metadata
    then decides."""
    task = Task(id="t1")
    task.status.message.CopyFrom(agent_message({URI: {"recipient": 42}}))
    task.metadata.update({URI: {"recipient": "user"}})
    decision, found = client_routing.read_checked(task)
    assert decision is not None and decision.recipient == "user" and found == RECIPIENT_42


# -- in process -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_recipient_that_is_not_a_string_is_in_the_trail_the_note_and_the_span(
    spans: InMemorySpanExporter,
) -> None:
    """recipient 42 is no decision (the static route goes on), and it is named: trail, note, span."""
    squad = team(
        answering("desk", "desk says", {"recipient": 42}),
        probe("writer", reply="written", route="user"),
        routes={"desk": "writer"},
    )
    data, _ = await final_data(squad)
    first, second = data["trail"]
    assert (first["agent"], first["recipient"], first["reason"]) == ("desk", "writer", "static route")
    assert first["problem"] == RECIPIENT_42
    assert "problem" not in second  # a well-formed answer has none
    [at_writer] = RECEIVED["writer"]
    assert content(at_writer) == ["desk says", NOTE_42]
    assert hop_problems(spans.get_finished_spans()) == {"desk": RECIPIENT_42, "writer": None}


@pytest.mark.anyio
async def test_a_default_agent_with_a_bad_recipient_ends_the_turn_with_the_note_to_the_user() -> None:
    data, lines = await final_data(team(answering("desk", "desk says", {"recipient": 42}), probe("writer")))
    assert [hop["problem"] for hop in data["trail"]] == [RECIPIENT_42]
    assert lines == ["desk says", NOTE_42]
    assert RECEIVED["writer"] == []


@pytest.mark.anyio
async def test_handoffs_naming_a_stranger_are_named_and_the_known_peers_still_offered() -> None:
    squad = team(
        probe("desk", reply="desk says", route="writer", handoffs=["critic", "ghost"]),
        probe("writer", reply="written", route="user"),
        probe("critic"),
    )
    data, _ = await final_data(squad)
    assert [(hop["agent"], hop["recipient"], hop.get("problem")) for hop in data["trail"]] == [
        ("desk", "writer", GHOST),
        ("writer", "user", None),
    ]
    [at_writer] = RECEIVED["writer"]
    assert content(at_writer) == ["desk says", f"[ranch] desk's routing data: {GHOST}."]
    assert peer_ids(at_writer) == ["critic"]


@pytest.mark.anyio
async def test_a_field_of_the_wrong_type_is_named_and_the_decision_still_followed() -> None:
    squad = team(
        answering(
            "desk", "desk says", {"recipient": "writer", "reason": 7, "usage": {"totalTokens": "many"}}
        ),
        probe("writer", reply="written", route="user"),
    )
    data, _ = await final_data(squad)
    problem = (
        f"reason is 7, not a string (ignored; {SCHEMA}/reason/type); "
        f'usage.totalTokens is "many", not a number (ignored; {SCHEMA}/usage/properties/totalTokens/type)'
    )
    assert [(hop["agent"], hop.get("problem")) for hop in data["trail"]] == [
        ("desk", problem),
        ("writer", None),
    ]
    assert content(RECEIVED["writer"][0])[-1] == f"[ranch] desk's routing data: {problem}."


# -- over HTTP, official a2a-sdk peers answering the malformed data -------------------------------


def team_over_http(peer_url: str, routes: str, tmp_path: Path, text: str = "hello") -> Task:
    """A team whose default agent `desk` is the sdk peer at `peer_url`, called with the sdk client."""
    config = f"""
agents:
  - {{id: desk, kind: remote, url: "{peer_url}", timeout: 20}}
  - {{id: writer, kind: python, entry: "_support.probes:Probe", client_routing: true,
     options: {{reply: "written", route: user}}}}
  - {{id: critic, kind: python, entry: "_support.probes:Probe", client_routing: true}}
teams:
  - {{id: team, members: [desk, writer, critic], default_agent: desk{routes}}}
"""

    async def call(url: str) -> Task:
        async with sdk_client(url) as client:
            (response,) = await send(client, user_message(text))
        return response.task

    with serve_ranch(config, tmp_path / "r.db") as hub:
        task = anyio.run(call, hub.agent_url("team"))
    assert task.status.state == COMPLETED, MessageToDict(task)
    return task


def test_an_sdk_peer_answering_recipient_42_over_http(spans: InMemorySpanExporter, tmp_path: Path) -> None:
    with running_peer("router", route_to=42, reason="picked a number") as peer:
        task = team_over_http(peer.url, ", routes: {desk: writer}", tmp_path)
    trail = trail_of(task)
    assert [(hop["agent"], hop["recipient"], hop.get("problem")) for hop in trail] == [
        ("desk", "writer", RECIPIENT_42),
        ("writer", "user", None),
    ]
    [at_writer] = RECEIVED["writer"]
    assert content(at_writer) == ["router saw: hello", NOTE_42]
    assert hop_problems(spans.get_finished_spans()) == {"desk": RECIPIENT_42, "writer": None}


def test_an_sdk_peer_handing_off_to_a_stranger_over_http(spans: InMemorySpanExporter, tmp_path: Path) -> None:
    with running_peer("router", route_to="writer", handoffs=["critic", "ghost"]) as peer:
        task = team_over_http(peer.url, "", tmp_path)
    trail = trail_of(task)
    assert [(hop["agent"], hop["recipient"], hop.get("problem")) for hop in trail] == [
        ("desk", "writer", GHOST),
        ("writer", "user", None),
    ]
    [at_writer] = RECEIVED["writer"]
    assert content(at_writer) == ["router saw: hello", f"[ranch] desk's routing data: {GHOST}."]
    assert peer_ids(at_writer) == ["critic"]
    assert hop_problems(spans.get_finished_spans())["desk"] == GHOST
