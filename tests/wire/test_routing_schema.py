"""The client-routing extension's JSON Schemas (issue 36, item 1): the document ranch publishes at
`GET /extensions/client-routing/v1/schema.json`, what ranch itself sends and answers measured by it,
and every answer ranch read without a problem before still read without one.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import jsonschema
import pytest
from a2a.types import Message, TaskStatusUpdateEvent
from google.protobuf.json_format import MessageToDict

from _support.hubkit import serve_ranch
from _support.probes import RECEIVED, Probe
from _support.sdk import user_message
from ranch import AgentInfo, Call, Event, Team, reply
from ranch.agents.loader import PythonAgent
from ranch.wire import client_routing, routing_schema
from ranch.wire.client_routing import URI, declaration

CONFIG = """
agents:
  - {id: clerk, kind: rules, rules: [{reply: "ok", route: user}]}
"""


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve_ranch(CONFIG, tmp_path_factory.mktemp("schema") / "r.db", auth="keys") as served:
        yield served.url


def test_the_document_is_a_valid_2020_12_schema_with_both_parts() -> None:
    document = routing_schema.document()
    jsonschema.Draft202012Validator.check_schema(document)
    assert {"request", "response", "agentCard", "recipient", "hop"} <= set(document["$defs"])
    assert document["$id"] == "https://ranch.woi.dev/extensions/client-routing/v1/schema.json"


def test_the_server_publishes_it_without_a_key(hub: str) -> None:
    """`--auth keys`, and no key sent: the schema is public, like a card."""
    whole = httpx.get(hub + routing_schema.SCHEMA_PATH)
    assert whole.status_code == 200, whole.text
    assert whole.headers["content-type"].startswith("application/schema+json")
    assert whole.json() == routing_schema.document()
    response = httpx.get(hub + routing_schema.SCHEMA_PATH, params={"part": "response"}).json()
    assert response["$ref"] == "#/$defs/response" and response["$defs"] == routing_schema.document()["$defs"]
    bad = httpx.get(hub + routing_schema.SCHEMA_PATH, params={"part": "answer"})
    assert bad.status_code == 400
    assert bad.json()["error"]["field"] == "part" and "'answer'" in bad.json()["error"]["message"]


def test_a_note_names_a_location_of_the_published_document_where_any_validator_fails_too(hub: str) -> None:
    """The location in ranch's note is a JSON pointer into the served document, and an independent
    validator given `?part=response` fails at that very place."""
    published = httpx.get(hub + routing_schema.SCHEMA_PATH, params={"part": "response"}).json()
    data: dict[str, Any] = {"recipient": 42, "usage": {"totalTokens": "many"}}
    noted = [
        problem.rsplit("schema.json#", 1)[1].rstrip(")") for problem in client_routing.data_problems(data)
    ]
    found = [
        "/$defs/response/" + "/".join(map(str, e.schema_path))
        for e in _validator(published).iter_errors(data)
    ]
    assert (
        noted
        == found
        == [
            "/$defs/response/properties/recipient/anyOf",
            "/$defs/response/properties/usage/properties/totalTokens/type",
        ]
    )
    for pointer in noted:  # each resolves in the document
        node: Any = published
        for step in pointer.strip("/").split("/"):
            node = node[int(step)] if isinstance(node, list) else node[step]


def _validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    checker: jsonschema.protocols.Validator = jsonschema.Draft202012Validator(schema)
    return checker


ACCEPTED: list[Any] = [
    {"recipient": "writer", "reason": "ready"},
    {"recipient": " writer "},
    {"recipient": {"type": "user"}},
    {"recipient": {"type": "sender", "id": 5}},
    {"recipient": {"type": "agent", "id": "writer"}},
    {"recipient": None, "reason": None, "handoffs": None, "usage": None},
    {"recipient": "writer", "handoffs": []},
    {"usage": {"inputTokens": 3, "outputTokens": 4.5, "other": "x"}},
    {"usage": {"totalTokens": None}},
    {"recipient": "user", "onDone": "escalate"},
    {"recipient": "user", "onDone": 7},
    {
        "agentCards": [1],
        "sender": 2,
        "trail": "x",
        "hops": "many",
        "error": [],
    },  # echoed or unknown: left alone
    {},
]


@pytest.mark.parametrize("data", ACCEPTED)
def test_answers_ranch_read_without_a_problem_still_have_none(data: Any) -> None:
    assert client_routing.data_problems(data) == []
    message = Message(message_id="m1")
    message.metadata.update({URI: data})
    assert client_routing.read_checked(message)[1] is None


def test_a_number_json_cannot_hold_is_read_as_absent() -> None:
    """NaN from a member's JSON writer: `usage` of nothing reported, as before (docs/routing.md, Budgets)."""
    message = Message(message_id="m1")
    message.metadata.update({URI: {"recipient": "user", "usage": {"totalTokens": float("nan")}}})
    decision, problem = client_routing.read_checked(message)
    assert decision is not None and problem is None


@pytest.mark.parametrize("size", [10, 5000])
def test_long_and_short_routing_data_are_checked_alike(size: int) -> None:
    """Short answers' problems are remembered (`_CACHED_TEXT`), long ones checked each time: same words."""
    data = {"recipient": 42, "reason": "x" * size}
    assert client_routing.data_problems(data) == client_routing.data_problems(copy.deepcopy(data))
    assert client_routing.data_problems(data)[0].startswith("recipient is 42, not a string (ignored; ")


# -- what ranch itself sends and answers ----------------------------------------------------------


def _member(agent_id: str, **options: Any) -> PythonAgent:
    return PythonAgent(
        AgentInfo(id=agent_id, name=agent_id, extensions=[declaration()]), Probe(agent_id, **options).run
    )


def _costly(agent_id: str) -> PythonAgent:
    async def run(message: Message, call: Call) -> AsyncGenerator[Event, None]:
        RECEIVED[agent_id].append(message)
        answer = reply(message, "paid", client_routing.RoutingDecision(recipient="user", reason="done"))
        yield client_routing.attach_usage(answer, {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7})

    return PythonAgent(AgentInfo(id=agent_id, name=agent_id, extensions=[declaration()]), run)


@pytest.mark.anyio
async def test_a_ranch_team_sends_and_answers_what_the_schema_describes() -> None:
    """An outer team calls an inner team: every member's request data is a valid `request`, and the
    inner team's final answer (trail, hops, usage, its decision outward) a valid `response`."""
    inner = Team(
        id="inner",
        members={"a": _member("a", reply="to b", route="b", handoffs=["b"]), "b": _costly("b")},
        default_agent="a",
    )
    outer = Team(
        id="outer", members={"desk": _member("desk", route="inner"), "inner": inner}, default_agent="desk"
    )
    with anyio.fail_after(5):
        events = [event async for event in outer.run(user_message("hello", context_id="c1"), Call())]
    for agent in ("desk", "a", "b"):
        [received] = RECEIVED[agent]
        assert routing_schema.errors("request", MessageToDict(received.metadata)[URI]) == []
    final = events[-1]
    assert isinstance(final, TaskStatusUpdateEvent)
    answer = MessageToDict(final.metadata)[URI]
    assert answer["trail"][1]["trail"] and answer["usage"] == {"totalTokens": 7}
    assert routing_schema.errors("response", answer) == []
    hop = routing_schema.published()
    hop = {**hop, "$ref": "#/$defs/hop"}
    assert [list(_validator(hop).iter_errors(entry)) for entry in answer["trail"]] == [[], []]


def test_the_schema_ships_with_the_package() -> None:
    assert (Path(routing_schema.__file__).parent / routing_schema.SCHEMA_FILE).is_file()
