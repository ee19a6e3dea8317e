"""The JSON shapes of rooms' objects (docs/api.md), as response models read from the rows.

Each model reads its row (`from_attributes`), so the REST answers, the WebSocket's events and the
OpenAPI document's schemas are one definition; each reads its own JSON back too, which is how
`ranch.client` types what the hub answers. The functions below give the JSON of a row, for
the events a change writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol
from urllib.parse import quote

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    computed_field,
    model_validator,
)

from ranch.protocol.parts import decoded_size
from ranch.protocol.vocabulary import (
    ExecutionStatus,
    MessageType,
    ParticipantKind,
    Role,
    RoomStatus,
    RoomType,
    iso,
)

if TYPE_CHECKING:  # the rows are read by attribute; the client reads these models without the tables
    from ranch.db.models import Delivery, Execution, Participant


class MessageRow(Protocol):
    """A message as the views read it: a stored row (`RoomMessage`) or one being written
    (`rooms.bus.NewMessage`), by attribute."""

    @property
    def id(self) -> str: ...
    @property
    def seq(self) -> int: ...
    @property
    def room_id(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def sender_kind(self) -> str: ...
    @property
    def sender_id(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def parts(self) -> list[Any] | None: ...
    @property
    def mentions(self) -> list[str]: ...
    @property
    def meta(self) -> dict[str, Any]: ...
    @property
    def thread_id(self) -> str | None: ...
    @property
    def execution_id(self) -> str | None: ...
    @property
    def created_at(self) -> float: ...


def _iso(value: Any) -> Any:
    return iso(value) if isinstance(value, int | float) else value


Timestamp = Annotated[str, BeforeValidator(_iso), WithJsonSchema({"type": "string", "format": "date-time"})]
"""A stored time (seconds since the epoch) as the API shows it: ISO 8601 in UTC."""


def unfolded(data: Any, name: str) -> Any:
    """A model's own JSON, read back (`ranch.client`): the `{kind, id}` object `name` it shows
    gives the two fields (`<name>_kind`, `<name>_id`) it is made of."""
    if isinstance(data, dict) and isinstance(data.get(name), dict):
        return {**data, f"{name}_kind": data[name].get("kind"), f"{name}_id": data[name].get("id")}
    return data


class View(BaseModel):
    """A response model, read from a row's attributes."""

    model_config = ConfigDict(from_attributes=True)


class RoomView(View):
    id: str
    """Also the room's A2A contextId."""
    org_id: str
    type: RoomType
    status: RoomStatus
    title: str
    default_agent: str | None
    created_by: str | None
    created_at: Timestamp


class ParticipantView(View):
    kind: ParticipantKind
    id: str = Field(validation_alias=AliasChoices("ref", "id"))
    role: Role
    name: str
    """The person's or agent's display name."""
    joined_at: Timestamp

    @classmethod
    def of(cls, row: Participant, name: str | None = None) -> ParticipantView:
        fields = {"kind": row.kind, "ref": row.ref, "role": row.role, "joined_at": row.joined_at}
        return cls.model_validate({**fields, "name": name or row.ref})


class Sender(BaseModel):
    kind: Literal["user", "agent", "team", "system"]
    id: str


class MessageView(View):
    id: str
    cursor: int = Field(validation_alias=AliasChoices("seq", "cursor"))
    """Its place in the room; page with `since=<cursor>`."""
    room_id: str
    type: MessageType
    sender_kind: Literal["user", "agent", "team", "system"] = Field(exclude=True)
    sender_id: str = Field(exclude=True)
    text: str
    """Its text parts, joined by newlines."""
    stored_parts: list[dict[str, Any]] | None = Field(validation_alias="parts", exclude=True)
    mentions: list[str]
    """The ids it addresses: its `@id`s and the explicit ones."""
    metadata: dict[str, Any] = Field(validation_alias=AliasChoices("meta", "metadata"))
    thread_id: str | None
    execution_id: str | None
    """The execution that wrote it (agent messages)."""
    created_at: Timestamp

    @model_validator(mode="before")
    @classmethod
    def _from_json(cls, data: Any) -> Any:
        return unfolded(data, "sender")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def sender(self) -> Sender:
        return Sender(kind=self.sender_kind, id=self.sender_id)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def parts(self) -> list[dict[str, Any]]:
        """Its parts other than text, in order, as A2A JSON: files (`url`, `mediaType`, `filename`)
        and data. A file posted with its bytes is a link to them on the hub (`file_link`), so no page
        carries base64. Its text is `text` alone, never sent twice; a plain text message has none."""
        return shown_parts(self.stored_parts, self.room_id, self.id)


def shown_parts(stored: list[dict[str, Any]] | None, room_id: str, message_id: str) -> list[dict[str, Any]]:
    """A message's stored parts as `MessageView.parts` shows them."""
    return [
        file_link(part, room_id, message_id, index) if "raw" in part else part
        for index, part in enumerate(stored or [])
        if "text" not in part
    ]


PART_PATH = "/api/v1/rooms/{room}/messages/{message}/parts/{index}"
"""Where a stored part's bytes are read (api/routes.py `get_part`): `index` counts every stored part
of the message, its text parts included."""


def file_link(part: dict[str, Any], room_id: str, message_id: str, index: int) -> dict[str, Any]:
    """A file part holding bytes (`raw`) as views show it: a relative `url` to its bytes on the hub
    (a posted URL is always absolute http(s), so a relative one is always the hub's own) and its
    decoded `size`; its `mediaType`, `filename` and `metadata` as stored."""
    url = PART_PATH.format(room=quote(room_id, safe=""), message=quote(message_id, safe=""), index=index)
    kept = {key: value for key, value in part.items() if key != "raw"}
    return {"url": url, **kept, "size": decoded_size(part["raw"])}


class ExecutionView(View):
    id: str
    """Also the A2A task id."""
    room_id: str
    agent_id: str
    status: ExecutionStatus
    reason: str
    turns: int
    tool_calls: list[Any]
    parent_execution_id: str | None = None
    """The execution that handed this one its work (a handoff's child); it is woken when this one ends."""
    handoff_to: str | None = None
    """While `handoff`: the child execution it handed its work to and waits for."""
    created_at: Timestamp
    updated_at: Timestamp


class ExecutionDetail(ExecutionView):
    """`GET /api/v1/executions/{id}`: the execution, with the one it works for and those it handed off to."""

    parent: ExecutionView | None = None
    children: list[ExecutionView] = Field(default_factory=list)
    """Oldest first, ended ones included."""


class DeliveryView(View):
    """What an external agent receives for a message addressed to it."""

    type: Literal["delivery"] = "delivery"
    delivery_id: str
    room_id: str
    message: MessageView

    @classmethod
    def of(cls, row: Delivery, message: MessageRow) -> DeliveryView:
        return cls(delivery_id=row.id, room_id=row.room_id, message=MessageView.model_validate(message))


class EventView(BaseModel):
    """A room event: a WebSocket frame, and an item of `GET .../events`."""

    type: str
    """`message.created`, `execution.updated`, `routing.decided`, `participant.joined`, ..."""
    room_id: str
    cursor: int | None
    """Its place in the events of every room (null: a live-only event)."""
    at: str | None = None
    data: dict[str, Any]


def participant(row: Participant, name: str | None = None) -> dict[str, Any]:
    return ParticipantView.of(row, name).model_dump(mode="json")


def message(row: MessageRow) -> dict[str, Any]:
    """`MessageView`'s JSON of a message, built directly: every post's event and answer is this, and
    the model's validation and dump cost 25-30 µs a message, this 4 (timeit, 2026-11-28; a post
    costs 6-21 % less CPU without the model and the ORM objects: bench/README.md).
    tests/rooms/test_views.py holds it equal to the model's, key order and bytes included."""
    return {
        "id": row.id,
        "cursor": row.seq,
        "room_id": row.room_id,
        "type": str(row.type),
        "text": row.text,
        "mentions": list(row.mentions),
        "metadata": dict(row.meta),
        "thread_id": row.thread_id,
        "execution_id": row.execution_id,
        "created_at": _iso(row.created_at),
        "sender": {"kind": row.sender_kind, "id": row.sender_id},
        "parts": shown_parts(row.parts, row.room_id, row.id),
    }


def execution(row: Execution) -> dict[str, Any]:
    return ExecutionView.model_validate(row).model_dump(mode="json")


def delivery(row: Delivery, message_row: MessageRow) -> dict[str, Any]:
    return DeliveryView.of(row, message_row).model_dump(mode="json")
