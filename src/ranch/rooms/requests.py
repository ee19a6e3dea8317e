"""What callers send to rooms: the bodies of docs/api.md's room endpoints, as models.

The API parses each body with one of these (an unknown field is refused, a bad value is named by
its field) and hands it to `rooms.service.Rooms`; what needs the database (is that agent usable,
is the room active) or the server's limits (a message's size) is checked there.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator

from ranch.db.models import MessageType, ParticipantKind, Role, RoomStatus, RoomType
from ranch.policy.fields import Body, Filled, Ref, RoomName, Text, Title, filled


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
    """`POST /api/v1/rooms/{id}/messages`: a text wakes the agents it mentions (or the default one)."""

    text: Filled
    type: Literal[MessageType.TEXT, MessageType.THOUGHT] = MessageType.TEXT
    """A thought is shown, and wakes no one."""
    mentions: list[Text] | None = None
    """Agent ids to wake besides the text's `@id`s."""
    metadata: dict[str, Any] | None = None
    thread_id: str | None = None
