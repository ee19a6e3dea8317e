"""The client-routing A2A extension: URI, typed payloads and the helpers around them.

The contract is `docs/routing.md` (section 1): peers travel router -> agent in
`message.metadata[URI]`; the agent answers with a recipient in its reply's
`metadata[URI]`. Only agents that declare the URI on their card ever see it.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from a2a.types import AgentCard, AgentExtension, Message, Task, TaskStatusUpdateEvent
from google.protobuf.struct_pb2 import ListValue, Struct, Value
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from ranch.wire import routing_schema

if TYPE_CHECKING:
    import jsonschema

URI = "https://ranch.woi.dev/extensions/client-routing/v1"
"""The extension's identifier; versioned, as A2A 1.0 section 4.6.3 asks."""

X_RECIPIENT = "x-recipient"
"""The feature spec's shorthand metadata key; read, never written."""

DESCRIPTION = "Receives its peers' cards in message metadata and answers with the next recipient."

USER = "user"
SENDER = "sender"


class _Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class SimplifiedAgentCard(_Wire):
    """What a routing agent learns about one peer: enough to choose, nothing more."""

    id: str
    name: str
    description: str = ""
    capabilities: list[str] = Field(default_factory=list)
    """The peer's skill names (or tags)."""
    supports_client_routing: bool = False


class CallerCard(_Wire):
    """Who the turn is for: the authenticated principal (docs/routing.md, "The caller")."""

    id: str
    organization: str
    kind: str = "person"
    """`person` or `agent`."""
    role: str | None = None


class Seen(_Wire):
    """Router -> member team: the members reached and digests of the texts said in this turn, across
    every team it passed through (docs/routing.md, "Loops")."""

    members: list[str] = Field(default_factory=list)
    texts: list[str] = Field(default_factory=list)


class RoutingRequest(_Wire):
    """Router -> agent: the peers it may hand over to and who sent this message."""

    agent_cards: list[SimplifiedAgentCard]
    sender: str
    """`"user"` or the id of the agent whose reply this message carries."""
    hops_remaining: int | None = None
    trail: list[str] | None = None
    caller: CallerCard | None = None
    """The person or agent the turn is for, when the server knows (absent: anonymous)."""
    seen: Seen | None = None
    """What the whole tree of teams has reached in this turn, so a member team's loop guard counts it."""


RETURN = "return"
"""`onDone` on a team's `user`: its answer returns to the caller, whose static route still applies."""


class RoutingDecision(_Wire):
    """Agent -> router: who goes next, and why."""

    recipient: str
    """`"user"`, `"sender"`, or a member id."""
    reason: str | None = None
    handoffs: list[str] | None = None
    on_done: str | None = None
    """On a team's `user`: `return` (its caller's static route for it still applies) or absent."""


class Handoff(_Wire):
    """Agent -> room: another agent of the room takes this work over (docs/routing.md, "Handoffs in
    rooms"); the agent waits, and is woken with that agent's result."""

    agent: str
    """The id of an agent of the room (not the one handing off)."""
    reason: str = ""
    message: str | None = None
    """What the agent taking over is asked; absent: the reply it comes with."""


def declaration(required: bool = False) -> AgentExtension:
    """The `capabilities.extensions` entry an agent card carries to declare support."""
    return AgentExtension(uri=URI, description=DESCRIPTION, required=required)


def declare(card: AgentCard) -> AgentCard:
    """Add the declaration to `card` (idempotent) and return it."""
    if not supports(card):
        card.capabilities.extensions.append(declaration())
    return card


def supports(card: AgentCard) -> bool:
    """True when the card declares the client-routing extension."""
    return any(ext.uri == URI for ext in card.capabilities.extensions)


def attach_request(message: Message, request: RoutingRequest) -> Message:
    """Put the routing request on `message` (metadata and `extensions`), in place."""
    message.metadata.update({URI: request.model_dump(by_alias=True, exclude_none=True)})
    if URI not in message.extensions:
        message.extensions.append(URI)
    return message


def attach_request_data(
    message: Message,
    *,
    peers: ListValue,
    sender: str,
    hops_remaining: int | None = None,
    trail: list[str] | None = None,
    caller: dict[str, str] | None = None,
    seen: tuple[list[str], list[str]] | None = None,
) -> Message:
    """`attach_request` for the Router's hot path: the peer list comes prebuilt as a ListValue.

    Writes the same metadata as `attach_request(message, RoutingRequest(...))`, field by field.
    """
    data = message.metadata.fields[URI].struct_value
    data.fields["agentCards"].list_value.CopyFrom(peers)
    data.fields["sender"].string_value = sender
    if hops_remaining is not None:
        data.fields["hopsRemaining"].number_value = hops_remaining
    if trail is not None:
        listed = data.fields["trail"].list_value
        listed.SetInParent()
        for agent in trail:
            listed.values.add().string_value = agent
    if caller is not None:
        data.fields["caller"].struct_value.update(caller)
    if seen is not None:
        reached = data.fields["seen"].struct_value
        for name, items in (("members", seen[0]), ("texts", seen[1])):
            listed = reached.fields[name].list_value
            listed.SetInParent()  # an empty list is still a list
            listed.extend(items)
    if URI not in message.extensions:
        message.extensions.append(URI)
    return message


def peer_list(cards: list[SimplifiedAgentCard]) -> ListValue:
    """Peers as the protobuf list `attach_request_data` takes; build it once, reuse it every hop."""
    values = ListValue()
    values.extend([card.model_dump(by_alias=True) for card in cards])
    return values


def strip(message: Message) -> Message:
    """Remove every trace of the extension from `message`, in place (SC-003)."""
    for key in (URI, X_RECIPIENT):
        if key in message.metadata.fields:
            del message.metadata[key]
    if URI in message.extensions:
        kept = [uri for uri in message.extensions if uri != URI]
        del message.extensions[:]
        message.extensions.extend(kept)
    return message


def attach_decision(message: Message, decision: RoutingDecision) -> Message:
    """Put a routing decision on an agent's reply, in place."""
    message.metadata.update({URI: decision.model_dump(by_alias=True, exclude_none=True)})
    if URI not in message.extensions:
        message.extensions.append(URI)
    return message


def read_request(message: Message) -> RoutingRequest | None:
    """The routing request carried by an incoming message, if any."""
    data = _field(message.metadata, URI)
    if not isinstance(data, dict) or "agentCards" not in data:
        return None
    try:
        return RoutingRequest.model_validate(data)
    except ValidationError:  # not the request the contract describes: as if none came
        return None


def read_decision(reply: Message | Task) -> RoutingDecision | None:
    """The decision in an agent's reply; the first place that has one wins.

    For a Message: its metadata. For a Task: the final status message, then the
    last artifact, then the task's own metadata.
    """
    return read_checked(reply)[0]


def read_checked(reply: Message | Task) -> tuple[RoutingDecision | None, str | None]:
    """`read_decision`, and what was wrong with the routing data read on the way (None: nothing), so
    a member's malformed answer is named to its author instead of vanishing as "no decision"."""
    problems: list[str] = []
    for metadata in _places(reply):
        decision = _checked(metadata, problems)
        if decision is not None:
            return decision, "; ".join(problems) or None
    return None, "; ".join(problems) or None


def _places(reply: Message | Task) -> list[Struct]:
    """Where an answer may carry the extension's response data, in the order it is read: a Message's
    metadata; a Task's final status message, then its last artifact, then its own metadata."""
    if isinstance(reply, Message):
        return [reply.metadata]
    places: list[Struct] = []
    if reply.status.HasField("message"):
        places.append(reply.status.message.metadata)
    if reply.artifacts:
        places.append(reply.artifacts[-1].metadata)
    places.append(reply.metadata)
    return places


def attach_handoff(message: Message, handoff: Handoff) -> Message:
    """Hand the work over to another agent of the room: `metadata[URI].handoff`, beside any decision."""
    data = message.metadata.fields[URI].struct_value
    data.fields["handoff"].struct_value.update(handoff.model_dump(by_alias=True, exclude_none=True))
    if URI not in message.extensions:
        message.extensions.append(URI)
    return message


def read_handoff(reply: Message | Task | TaskStatusUpdateEvent) -> Handoff | None:
    """The handoff an answer asks for (`metadata[URI].handoff`), first found where a decision is read;
    for a status event, its message's metadata then its own. None when there is none, or it names no
    agent."""
    if isinstance(reply, TaskStatusUpdateEvent):
        places = [reply.status.message.metadata, reply.metadata]
    else:
        places = _places(reply)
    for metadata in places:
        data = _field(metadata, URI)
        handoff = data.get("handoff") if isinstance(data, dict) else None
        if isinstance(handoff, dict) and isinstance(handoff.get("agent"), str) and handoff["agent"].strip():
            reason, message = handoff.get("reason"), handoff.get("message")
            return Handoff(
                agent=handoff["agent"].strip(),
                reason=reason if isinstance(reason, str) else "",
                message=message if isinstance(message, str) and message.strip() else None,
            )
    return None


def attach_usage(message: Message, usage: dict[str, int]) -> Message:
    """Report what an answer cost: `metadata[URI].usage = {inputTokens, outputTokens, totalTokens}`
    beside any decision (docs/routing.md, "Budgets")."""
    data = message.metadata.fields[URI].struct_value
    data.fields["usage"].struct_value.update(usage)
    if URI not in message.extensions:
        message.extensions.append(URI)
    return message


def read_usage(reply: Message | Task) -> int | None:
    """The tokens an answer reports having cost (`usage.totalTokens`, else input + output), if any."""
    for metadata in _places(reply):
        data = _field(metadata, URI)
        usage = data.get("usage") if isinstance(data, dict) else None
        if isinstance(usage, dict):
            total = _count(usage.get("totalTokens"))
            if total is not None:
                return total
            counts = [_count(usage.get(key)) for key in ("inputTokens", "outputTokens")]
            parts = [count for count in counts if count is not None]
            return sum(parts) if parts else None  # nothing to count: as if nothing was reported
    return None


def _count(value: Any) -> int | None:
    """A number of tokens, from JSON numbers only (a member's `NaN` and `Infinity` were read as None)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return max(0, int(value))
    return None


def read_trail(reply: Message | Task) -> list[dict[str, Any]] | None:
    """The trail a team's answer carries (`metadata[URI]["trail"]`): the hops made inside it."""
    for metadata in _places(reply):
        data = _field(metadata, URI)
        if isinstance(data, dict) and isinstance(data.get("trail"), list):
            return [hop for hop in data["trail"] if isinstance(hop, dict)]
    return None


def decision_from_metadata(metadata: Struct) -> RoutingDecision | None:
    """Read a decision from one metadata object in any of the forms the contract lists."""
    return _checked(metadata, [])


def _checked(metadata: Struct, problems: list[str]) -> RoutingDecision | None:
    """`decision_from_metadata`, adding to `problems` each field of the response data whose type the
    contract does not allow (such a field is ignored, as before)."""
    data = _field(metadata, URI)
    if data is not None:
        problems.extend(data_problems(data))
    if isinstance(data, dict) and data.get("recipient") is not None:
        recipient = parse_recipient(data["recipient"])
        if recipient is not None:
            handoffs = data.get("handoffs")
            return RoutingDecision(
                recipient=recipient,
                reason=data.get("reason") if isinstance(data.get("reason"), str) else None,
                handoffs=[h for h in handoffs if isinstance(h, str)] if isinstance(handoffs, list) else None,
                on_done=RETURN if data.get("onDone") == RETURN else None,
            )
    shorthand = _field(metadata, X_RECIPIENT)
    recipient = parse_recipient(shorthand)
    if shorthand is not None:
        problems.extend(
            f"{X_RECIPIENT} is {shown(shorthand)}, not a recipient id "
            f"(ignored; {routing_schema.location('recipient', error)})"
            for error in routing_schema.errors("recipient", shorthand)
        )
    return RoutingDecision(recipient=recipient) if recipient is not None else None


def data_problems(data: Any) -> list[str]:
    """What is wrong with a reply's `metadata[URI]`, field by field, as the response schema
    (`ranch.wire.routing_schema`, `#/$defs/response`) finds it: a `recipient` that is not a string
    (or one of its object forms), a `reason` that is not a string, `handoffs` that are not a list of
    ids, a `usage` that is not an object of token counts. Each problem names the schema location
    that failed. Fields the contract does not check are left alone (a member may echo the request
    data back)."""
    try:
        text = json.dumps(data, allow_nan=False)
    except (TypeError, ValueError):  # not JSON data (a caller's own object): checked as it is
        text = None
    if text is not None and len(text) <= _CACHED_TEXT:
        return list(_response_problems(text))
    return [_problem(error) for error in routing_schema.errors("response", data)]


_CACHED_TEXT = 2048
"""Longest routing data (as JSON text) whose problems are remembered: the cache stays under 2 MB."""


@lru_cache(maxsize=1024)
def _response_problems(data: str) -> tuple[str, ...]:
    """`data_problems` of one JSON text: members answer the same routing data again and again."""
    return tuple(_problem(error) for error in routing_schema.errors("response", json.loads(data)))


def _problem(error: jsonschema.ValidationError) -> str:
    """One schema error in the words the member's author reads, with the location that failed."""
    path, value = [str(step) for step in error.absolute_path], shown(error.instance)
    where = routing_schema.location("response", error)
    if not path:
        return f"the routing data is {value}, not an object (ignored; {where})"
    field, named = path[0], ".".join(path)
    if field == "recipient":
        instance = error.instance
        kind = (
            "an id"
            if isinstance(instance, str)
            else "a recipient"
            if isinstance(instance, dict)
            else "a string"
        )
        return f"recipient is {value}, not {kind} (ignored; {where})"
    if field == "handoffs" and len(path) > 1:
        return f"handoffs holds {value}, not an id (left out; {where})"
    wanted = {
        "reason": "a string",
        "handoffs": "a list of ids",
        "handoff": "an object naming an agent" if len(path) == 1 else "what the schema allows",
        "usage": "an object of token counts" if len(path) == 1 else "a number",
    }.get(field, "what the schema allows")
    return f"{named} is {value}, not {wanted} (ignored; {where})"


def strangers_problem(strangers: list[str], team: str) -> str:
    """The problem of `handoffs` naming ids the team does not know (the peers offered leave them out)."""
    named = ", ".join(f"'{stranger}'" for stranger in strangers)
    members = "a member" if len(strangers) == 1 else "members"
    return f"handoffs names {named}, not {members} of team '{team}' (left out)"


def shown(value: Any, limit: int = 80) -> str:
    """A JSON value as a problem quotes it: whole numbers without `.0`, cut to `limit` characters."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parse_recipient(value: Any) -> str | None:
    """`"id"`, `{"type": "user"}` or `{"type": "agent", "id": "..."}` -> a recipient string."""
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, dict):
        kind: Literal["user", "sender", "agent"] | Any = value.get("type")
        if kind in (USER, SENDER):
            return str(kind)
        if kind == "agent" and isinstance(value.get("id"), str) and value["id"].strip():
            return str(value["id"]).strip()
    return None


def _field(metadata: Struct, key: str) -> Any:
    value = metadata.fields.get(key)
    return None if value is None else _plain(value)


def _plain(value: Value) -> Any:
    """A protobuf Value as JSON data. A number JSON has no room for (`NaN`, `Infinity`: Python's
    JSON reader took them from a member) is None, so what is read can always be written again."""
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return {key: _plain(item) for key, item in value.struct_value.fields.items()}
    if kind == "list_value":
        return [_plain(item) for item in value.list_value.values]
    if kind == "number_value":
        return value.number_value if math.isfinite(value.number_value) else None
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    return None
