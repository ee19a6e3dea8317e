"""Unit tests for `ranch.wire.client_routing`: the client-routing extension's helpers.

docs: /work/shared/specs/routing.md section 1 (declaration, request data, response data and
where a decision is looked for: the reply Message; for a Task its final status message, then
its last artifact, then the task's metadata).
"""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct

from ranch.wire import client_routing
from ranch.wire.client_routing import (
    SENDER,
    URI,
    USER,
    X_RECIPIENT,
    RoutingDecision,
    RoutingRequest,
    SimplifiedAgentCard,
)

OTHER_URI = "https://example.test/extensions/other/v1"


# -- builders ---------------------------------------------------------------------------------------


def struct(data: dict[str, Any] | None) -> Struct:
    value = Struct()
    if data:
        value.update(data)
    return value


def message(metadata: dict[str, Any] | None = None, extensions: list[str] | None = None) -> Message:
    return Message(
        message_id="m1",
        role=Role.ROLE_AGENT,
        parts=[Part(text="hello")],
        metadata=struct(metadata),
        extensions=extensions or [],
    )


def card(*uris: str) -> AgentCard:
    return AgentCard(
        name="a",
        description="d",
        version="1",
        capabilities=AgentCapabilities(extensions=[AgentExtension(uri=uri) for uri in uris]),
    )


def task(
    status: dict[str, Any] | None = None,
    artifacts: list[dict[str, Any] | None] | None = None,
    metadata: dict[str, Any] | None = None,
    *,
    status_message: bool = True,
) -> Task:
    built = Task(id="t1", context_id="c1", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED))
    if status_message:
        built.status.message.CopyFrom(message(status))
    for index, data in enumerate(artifacts or []):
        built.artifacts.append(
            Artifact(artifact_id=f"a{index}", parts=[Part(text=str(index))], metadata=struct(data))
        )
    built.metadata.CopyFrom(struct(metadata))
    return built


def uri_form(recipient: Any, **extra: Any) -> dict[str, Any]:
    return {URI: {"recipient": recipient, **extra}}


def meta(msg: Message) -> dict[str, Any]:
    data: dict[str, Any] = MessageToDict(msg.metadata)
    return data


# -- declaration ----------------------------------------------------------------------------------


def test_declaration_is_the_uri_optional_with_a_description_and_no_params() -> None:
    """The declaration is the URI, `required: false`, a one-line description and empty params."""
    ext = client_routing.declaration()
    assert ext.uri == URI == "https://ranch.woi.dev/extensions/client-routing/v1"
    assert ext.required is False
    assert ext.description and "\n" not in ext.description
    assert not ext.HasField("params") or not ext.params.fields
    assert client_routing.declaration(required=True).required is True


def test_declare_adds_the_extension_once_and_keeps_the_others() -> None:
    """declare() adds the URI to capabilities.extensions, idempotently, leaving other entries alone."""
    agent_card = card(OTHER_URI)
    returned = client_routing.declare(agent_card)
    assert returned is agent_card
    client_routing.declare(agent_card)
    uris = [ext.uri for ext in agent_card.capabilities.extensions]
    assert uris == [OTHER_URI, URI]


@pytest.mark.parametrize(
    ("uris", "expected"),
    [((), False), ((OTHER_URI,), False), ((URI,), True), ((OTHER_URI, URI), True), ((URI + "x",), False)],
)
def test_supports_is_true_exactly_when_the_card_declares_the_uri(
    uris: tuple[str, ...], expected: bool
) -> None:
    """An agent supports client routing exactly when its card lists the URI in capabilities.extensions."""
    assert client_routing.supports(card(*uris)) is expected


def test_supports_after_declare() -> None:
    """A card declared with declare() is recognised by supports()."""
    assert client_routing.supports(client_routing.declare(card())) is True


# -- request data (router -> agent) -----------------------------------------------------------------


def peers() -> list[SimplifiedAgentCard]:
    return [
        SimplifiedAgentCard(
            id="b", name="B", description="bee", capabilities=["search"], supports_client_routing=True
        ),
        SimplifiedAgentCard(id="c", name="C"),
    ]


def test_attach_request_writes_camel_case_metadata_and_the_extensions_entry() -> None:
    """attach_request writes {agentCards, sender, hopsRemaining, trail} in metadata[URI] and the URI."""
    msg = message({"keep": "me"}, [OTHER_URI])
    request = RoutingRequest(agent_cards=peers(), sender="a", hops_remaining=4, trail=["a"])
    returned = client_routing.attach_request(msg, request)
    assert returned is msg
    assert meta(msg) == {
        "keep": "me",
        URI: {
            "agentCards": [
                {
                    "id": "b",
                    "name": "B",
                    "description": "bee",
                    "capabilities": ["search"],
                    "supportsClientRouting": True,
                },
                {
                    "id": "c",
                    "name": "C",
                    "description": "",
                    "capabilities": [],
                    "supportsClientRouting": False,
                },
            ],
            "sender": "a",
            "hopsRemaining": 4,
            "trail": ["a"],
        },
    }
    assert list(msg.extensions) == [OTHER_URI, URI]


def test_attach_request_omits_optional_fields_and_is_idempotent_on_extensions() -> None:
    """Optional hopsRemaining/trail are left out when unset; the URI appears once in extensions."""
    msg = message()
    client_routing.attach_request(msg, RoutingRequest(agent_cards=[], sender=USER))
    client_routing.attach_request(msg, RoutingRequest(agent_cards=[], sender=USER))
    assert meta(msg) == {URI: {"agentCards": [], "sender": "user"}}
    assert list(msg.extensions) == [URI]


def test_read_request_round_trips_attach_request() -> None:
    """read_request returns what attach_request wrote."""
    request = RoutingRequest(agent_cards=peers(), sender="a", hops_remaining=3, trail=["x", "a"])
    msg = client_routing.attach_request(message(), request)
    assert client_routing.read_request(msg) == request


def test_read_request_accepts_camel_case_json_from_the_wire() -> None:
    """read_request parses the wire form (camelCase, numbers as JSON numbers)."""
    data = {
        "agentCards": [{"id": "b", "name": "B", "capabilities": ["x"], "supportsClientRouting": True}],
        "sender": "user",
        "hopsRemaining": 10,
    }
    request = client_routing.read_request(message({URI: data}))
    assert request is not None
    assert request.sender == "user"
    assert request.hops_remaining == 10
    assert request.trail is None
    assert request.agent_cards == [
        SimplifiedAgentCard(id="b", name="B", capabilities=["x"], supports_client_routing=True)
    ]


@pytest.mark.parametrize(
    "metadata",
    [
        None,
        {"other": 1},
        {URI: "not an object"},
        {URI: {"recipient": "b"}},  # a decision, not a request
        {X_RECIPIENT: "b"},
    ],
)
def test_read_request_is_none_without_request_data(metadata: dict[str, Any] | None) -> None:
    """A message without metadata[URI].agentCards carries no routing request."""
    assert client_routing.read_request(message(metadata)) is None


# -- strip (SC-003) -----------------------------------------------------------------------------------


def test_strip_removes_every_trace_of_the_extension_and_keeps_the_rest() -> None:
    """strip deletes metadata[URI], metadata['x-recipient'] and the URI in extensions; nothing else."""
    msg = message({URI: {"agentCards": []}, X_RECIPIENT: "b", "keep": 1}, [OTHER_URI, URI])
    returned = client_routing.strip(msg)
    assert returned is msg
    assert meta(msg) == {"keep": 1}
    assert list(msg.extensions) == [OTHER_URI]
    assert [part.text for part in msg.parts] == ["hello"]


def test_strip_on_a_clean_message_changes_nothing() -> None:
    """strip is a no-op on a message that carries no extension data."""
    msg = message({"keep": 1}, [OTHER_URI])
    before = Message()
    before.CopyFrom(msg)
    assert client_routing.strip(msg) == before


# -- decisions (agent -> router) ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        # the extension's own form: metadata[URI].recipient as a string
        (uri_form("b"), RoutingDecision(recipient="b")),
        (uri_form(USER), RoutingDecision(recipient=USER)),
        (uri_form(SENDER), RoutingDecision(recipient=SENDER)),
        (uri_form("  b  "), RoutingDecision(recipient="b")),
        # the feature spec's shorthand
        ({X_RECIPIENT: "b"}, RoutingDecision(recipient="b")),
        ({X_RECIPIENT: "user"}, RoutingDecision(recipient=USER)),
        ({X_RECIPIENT: "sender"}, RoutingDecision(recipient=SENDER)),
        # the Rust implementation's object form, inside metadata[URI].recipient
        (uri_form({"type": "user"}), RoutingDecision(recipient=USER)),
        (uri_form({"type": "sender"}), RoutingDecision(recipient=SENDER)),
        (uri_form({"type": "agent", "id": "b"}), RoutingDecision(recipient="b")),
        # ... and in x-recipient
        ({X_RECIPIENT: {"type": "user"}}, RoutingDecision(recipient=USER)),
        ({X_RECIPIENT: {"type": "agent", "id": "b"}}, RoutingDecision(recipient="b")),
    ],
    ids=lambda value: repr(value) if not isinstance(value, RoutingDecision) else "",
)
def test_read_decision_reads_every_recipient_form(
    metadata: dict[str, Any], expected: RoutingDecision
) -> None:
    """A recipient is read from metadata[URI].recipient, x-recipient, and the object form."""
    assert client_routing.read_decision(message(metadata)) == expected


def test_read_decision_carries_reason_and_handoffs() -> None:
    """reason and handoffs come along with the recipient; non-string entries are dropped."""
    metadata = uri_form("b", reason="needs research", handoffs=["c", 3, "d"])
    assert client_routing.read_decision(message(metadata)) == RoutingDecision(
        recipient="b", reason="needs research", handoffs=["c", "d"]
    )


def test_read_decision_ignores_malformed_reason_and_handoffs() -> None:
    """A non-string reason and non-list handoffs are ignored, the recipient still counts."""
    metadata = uri_form("b", reason=7, handoffs="c")
    assert client_routing.read_decision(message(metadata)) == RoutingDecision(recipient="b")


@pytest.mark.parametrize(
    "metadata",
    [
        None,
        {"other": "b"},
        uri_form(""),
        uri_form("   "),
        uri_form(None),
        uri_form(3),
        uri_form({"type": "agent"}),
        uri_form({"type": "agent", "id": ""}),
        uri_form({"type": "robot", "id": "b"}),
        {URI: {"agentCards": [], "sender": "user"}},  # request data is not a decision
        {URI: "b"},
        {X_RECIPIENT: ""},
        {X_RECIPIENT: 5},
    ],
)
def test_read_decision_is_none_without_a_usable_recipient(metadata: dict[str, Any] | None) -> None:
    """No recipient, an empty one, or an unknown object form is no decision."""
    assert client_routing.read_decision(message(metadata)) is None


def test_read_decision_prefers_the_uri_form_over_x_recipient() -> None:
    """When both forms are present, metadata[URI].recipient wins."""
    metadata = {**uri_form("b"), X_RECIPIENT: "c"}
    assert client_routing.read_decision(message(metadata)) == RoutingDecision(recipient="b")


def test_read_decision_falls_back_to_x_recipient_when_the_uri_form_is_unusable() -> None:
    """An unusable metadata[URI] (no or bad recipient) does not hide a valid x-recipient."""
    assert client_routing.read_decision(message({URI: {"reason": "x"}, X_RECIPIENT: "c"})) == RoutingDecision(
        recipient="c"
    )
    bad = {**uri_form({"type": "agent"}), X_RECIPIENT: "c"}
    assert client_routing.read_decision(message(bad)) == RoutingDecision(recipient="c")


def test_attach_decision_round_trips_through_read_decision() -> None:
    """A decision written with attach_decision is read back unchanged, with the URI in extensions."""
    decision = RoutingDecision(recipient="b", reason="why", handoffs=["c"])
    msg = client_routing.attach_decision(message(), decision)
    assert list(msg.extensions) == [URI]
    assert meta(msg) == {URI: {"recipient": "b", "reason": "why", "handoffs": ["c"]}}
    assert client_routing.read_decision(msg) == decision


# -- decisions in a Task reply: status message, then last artifact, then task metadata ----------------


def test_task_decision_status_message_wins() -> None:
    """For a Task, the final status message's decision wins over the artifacts and the task metadata."""
    reply = task(
        status=uri_form("from-status"), artifacts=[uri_form("from-artifact")], metadata=uri_form("from-task")
    )
    assert client_routing.read_decision(reply) == RoutingDecision(recipient="from-status")


def test_task_decision_then_last_artifact() -> None:
    """Without one in the status message, the last artifact's decision wins over the task metadata."""
    reply = task(status=None, artifacts=[None, uri_form("from-artifact")], metadata=uri_form("from-task"))
    assert client_routing.read_decision(reply) == RoutingDecision(recipient="from-artifact")
    no_status_message = task(
        artifacts=[{X_RECIPIENT: "from-artifact"}], metadata=uri_form("from-task"), status_message=False
    )
    assert client_routing.read_decision(no_status_message) == RoutingDecision(recipient="from-artifact")


def test_task_decision_only_the_last_artifact_counts() -> None:
    """An earlier artifact's decision is not looked at: after the last artifact comes the task metadata."""
    reply = task(artifacts=[uri_form("from-first-artifact"), None], metadata=uri_form("from-task"))
    assert client_routing.read_decision(reply) == RoutingDecision(recipient="from-task")
    without_task_metadata = task(artifacts=[uri_form("from-first-artifact"), None])
    assert client_routing.read_decision(without_task_metadata) is None


def test_task_decision_then_task_metadata() -> None:
    """Without a decision in the status message or last artifact, the task's own metadata is read."""
    reply = task(status=None, artifacts=[None], metadata={X_RECIPIENT: {"type": "user"}})
    assert client_routing.read_decision(reply) == RoutingDecision(recipient=USER)
    assert client_routing.read_decision(
        task(metadata=uri_form("t"), status_message=False)
    ) == RoutingDecision(recipient="t")


def test_task_decision_none_anywhere() -> None:
    """A Task with no decision anywhere has none."""
    assert client_routing.read_decision(task(artifacts=[None, None])) is None
    assert client_routing.read_decision(task(status_message=False)) is None


# -- parse_recipient ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("b", "b"),
        (" b ", "b"),
        ("", None),
        (None, None),
        (1, None),
        ([], None),
        ({"type": "user"}, USER),
        ({"type": "sender"}, SENDER),
        ({"type": "agent", "id": " b "}, "b"),
        ({"type": "agent", "id": 3}, None),
        ({"type": "agent"}, None),
        ({"id": "b"}, None),
    ],
)
def test_parse_recipient(value: Any, expected: str | None) -> None:
    """A recipient is a non-empty string or the object form; anything else is none."""
    assert client_routing.parse_recipient(value) == expected


def test_attach_request_data_writes_what_attach_request_writes() -> None:
    """The Router's prebuilt-peers path puts the same JSON on the message as the typed helper."""
    cards = [
        SimplifiedAgentCard(
            id="a", name="A", description="d", capabilities=["x"], supports_client_routing=True
        ),
        SimplifiedAgentCard(id="b", name="B"),
    ]
    typed = client_routing.attach_request(
        message(), RoutingRequest(agent_cards=cards, sender="a", hops_remaining=3, trail=["a", "b"])
    )
    fast = client_routing.attach_request_data(
        message(), peers=client_routing.peer_list(cards), sender="a", hops_remaining=3, trail=["a", "b"]
    )
    assert meta(fast) == meta(typed)
    assert list(fast.extensions) == list(typed.extensions) == [URI]
