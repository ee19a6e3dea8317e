"""What callers send to rooms: the bodies of docs/api.md's room endpoints, as models.

The API parses each body with one of these (an unknown field is refused, a bad value is named by
its field) and hands it to the room services (`rooms.service`, `rooms.messages`); what needs the
database (is that agent usable, is the room active) or the server's limits (a message's size) is
checked there.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from ranch.policy.fields import Body, Filled, Ref, RoomName, Text, Title, filled
from ranch.protocol.vocabulary import MessageType, ParticipantKind, Role, RoomStatus, RoomType
from ranch.rooms.parts import PartBody

MAX_PARTS = 64
"""Most parts one message holds."""


class AddParticipant(Body):
    """A participant to add: a person, an agent or a team of the organization."""

    kind: ParticipantKind
    id: Ref
    """In full, or an organization's short name for its own (`<org>.<id>` is tried first)."""
    role: Role = Role.MEMBER


class CreateRoom(Body):
    """`POST /api/v1/rooms`; the creator joins as its owner."""

    id: RoomName | None = None
    """Also the room's A2A contextId; another organization's gets its prefix. Omitted or empty: a UUID."""
    title: Title | None = None
    type: RoomType = RoomType.GROUP
    default_agent: Ref | None = None
    """Answers the messages that mention no one: one of the room's agents or teams."""
    participants: list[AddParticipant] | None = None


class UpdateRoom(Body):
    """`PATCH /api/v1/rooms/{id}`: only the fields given change."""

    title: Annotated[Title, AfterValidator(filled)] = ""
    status: RoomStatus = RoomStatus.ACTIVE
    """Archiving or closing a room completes its executions."""
    default_agent: Ref | None = None
    """null: the room has no default agent any more."""


class PostMessage(Body):
    """`POST /api/v1/rooms/{id}/messages`: a text wakes the agents it mentions (or the default one).

    `text`, `parts` or both: `text` is the first text part, before the `parts` given."""

    text: Filled | None = None
    parts: Annotated[list[PartBody], Field(min_length=1, max_length=MAX_PARTS)] | None = None
    """A2A parts: text, files (`raw` base64 or `url`) and data (docs/api.md, "Parts")."""
    type: Literal[MessageType.TEXT, MessageType.THOUGHT] = MessageType.TEXT
    """A thought is shown, and wakes no one."""
    mentions: list[Text] | None = None
    """Agent ids to wake besides the text's `@id`s."""
    metadata: dict[str, Any] | None = None
    thread_id: str | None = None
    reply_to: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    """An external agent answering a delivery: its `delivery_id`, acknowledged with the answer in one
    transaction, so a delivery is answered at most once (a second answer: 409 naming `reply_to`)."""

    @model_validator(mode="before")
    @classmethod
    def _some_content(cls, data: Any) -> Any:
        """Neither text nor parts: the error names `text`, the field a plain message needs."""
        if isinstance(data, dict) and data.get("text") is None and data.get("parts") is None:
            return {**data, "text": _NEITHER}
        return data

    @field_validator("text", mode="before")
    @classmethod
    def _text_or_parts(cls, value: Any) -> Any:
        if value is _NEITHER:
            raise ValueError("a message needs text or parts")
        return value


_NEITHER = object()


class HandOff(Body):
    """`POST /api/v1/executions/{id}/handoff`: another agent of the room takes the execution's work over."""

    agent: Ref
    """An agent of the room, not the execution's own (an organization's short name works)."""
    reason: Annotated[str, Field(max_length=1000)] = ""
    """Why, in a few words: the waiting execution's reason says it."""
    message: Filled | None = None
    """What the agent taking over is asked (default: the reason); the API's body limit bounds it."""
