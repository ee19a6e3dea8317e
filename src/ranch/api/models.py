"""The API's own request and response models: organizations, users, keys, agents, pages, frames.

Rooms' bodies and objects live with rooms (`rooms.requests`, `rooms.views`), registrations with
the catalog (`catalog.requests`), the key body with the keys (`identity.keys`); the route table
(api/routes.py) names each endpoint's models, and the OpenAPI document is made from them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Generic, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    computed_field,
    model_validator,
)

from ranch.policy.fields import Body, Count, Label, Name, Ref, Slug, UrlPrefix, plain
from ranch.policy.limits import MAX_INT
from ranch.protocol.vocabulary import AgentKind, Role, Visibility
from ranch.rooms.views import Timestamp, View, unfolded
from ranch.wire.cards import agent_url

if TYPE_CHECKING:  # read by attribute; the client reads these models without the tables
    from ranch.db.models import AgentRecord

T = TypeVar("T")

DEFAULT_LIMIT = 50
MAX_LIMIT = 200


# -- requests ------------------------------------------------------------------------------------------


class CreateOrg(Body):
    """`POST /api/v1/organizations` (the superuser): the organization and its owner."""

    id: Slug
    name: Label | None = None
    """Defaults to the id."""
    allowed_agent_urls: list[UrlPrefix] = Field(default_factory=list)
    """URL prefixes its agents may call and be registered at; empty: any public address."""
    owner_id: Slug | None = None
    """The owner's chosen id (it gets the organization's prefix); defaults to `owner`."""
    owner_name: Label | None = None


class UpdateOrg(Body):
    """`PATCH /api/v1/organizations/current`: only the fields given change."""

    name: Name = ""
    allowed_agent_urls: list[UrlPrefix] = Field(default_factory=list)


class CreateUser(Body):
    """`POST /api/v1/users` (an owner or admin)."""

    id: Slug | None = None
    """The chosen id (another organization's gets its prefix); omitted: a UUID."""
    name: Name
    role: Role = Role.MEMBER


class CompleteExecution(Body):
    """`POST /api/v1/executions/{id}/complete` (a room admin); the body may be left out."""

    reason: Annotated[str, Field(max_length=1000)] = ""
    """Why, as the execution's reason says (default: who completed it)."""


class Query(BaseModel):
    """Query parameters: whole numbers are read from their text; other parameters are ignored."""

    model_config = ConfigDict(extra="ignore")


Whole = Annotated[int, Field(ge=0, le=MAX_INT)]
"""A whole number from 0 to 2^63-1, as query text."""


class Window(Query):
    """`?since=&limit=`: the items after a cursor, oldest first (or `?before=&limit=`)."""

    since: Whole = 0
    """The cursor of the last item seen (exclusive)."""
    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT
    before: Whole | None = None
    """Instead of `since`: the newest `limit` items before this cursor (exclusive), oldest first
    (the room history an external agent is shown before a message; `before=<2^63-1>&limit=1`:
    the latest)."""


class Listing(Query):
    """`?limit=&cursor=`: one page of a listing."""

    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT
    cursor: str | None = None
    """The `next_cursor` of the page before."""


class TaskQuery(Query):
    history_length: Whole | None = None
    """Messages of the task's history to include (newest); omitted: the agent's `history_length`."""


# -- WebSocket frames ----------------------------------------------------------------------------------


def _rooms_form(value: Any) -> str:
    return "list" if isinstance(value, list) else "cursors"


def _some_rooms(rooms: dict[str, int] | list[str]) -> dict[str, int] | list[str]:
    if not rooms:
        raise ValueError("name at least one room")
    return rooms


RoomCursors = Annotated[
    Annotated[dict[Ref, Count], Tag("cursors")] | Annotated[list[Ref], Tag("list")],
    Discriminator(_rooms_form),
    AfterValidator(_some_rooms),
]
"""Room id -> the cursor of the last event of that room the client has (0: none); or (deprecated)
a list of room ids that share one `cursor`."""


class Subscribe(Body):
    """`{"type": "subscribe", "rooms": {"demo": 41, "ops": 0}}`: replay each room's events after its
    own cursor, then send live ones. The older form, a list of rooms and one `cursor` for them all,
    is deprecated (docs/api.md)."""

    type: Literal["subscribe"]
    rooms: RoomCursors
    cursor: Count | None = None
    """Only with a list of `rooms` (deprecated): the cursor of each of them (default 0)."""


class Unsubscribe(Body):
    type: Literal["unsubscribe"]
    rooms: Annotated[list[Ref], Field(min_length=1)]


class Ack(Body):
    """An external agent acknowledges a delivery."""

    type: Literal["ack"]
    delivery_id: str


class Ping(Body):
    type: Literal["ping"]


class Delta(Body):
    """An external agent streams its answer: text shown in the room as it comes (`message.delta`)."""

    type: Literal["delta"]
    room_id: Ref
    text: Annotated[str, Field(max_length=MAX_DELTA_CHARS), AfterValidator(plain)]
    append: bool = True
    """False: the text replaces what was streamed before."""


MAX_DELTA_CHARS = 10_000

Frame = Annotated[Subscribe | Unsubscribe | Ack | Ping | Delta, Field(discriminator="type")]
"""What a client may send on /api/v1/ws."""


# -- responses -----------------------------------------------------------------------------------------


class Page(BaseModel, Generic[T]):
    items: list[T]
    next_cursor: str | None
    """Pass it back (as `cursor`, or `since` for messages and events) for the next page; null: the last."""


class OrganizationView(View):
    id: str
    name: str
    allowed_agent_urls: list[str]
    created_at: Timestamp


class UserView(View):
    id: str
    org_id: str
    name: str
    role: Role
    created_at: Timestamp


class KeyOwnerView(BaseModel):
    kind: Literal["user", "agent"]
    id: str


class KeyView(View):
    """A key as listed: never the key itself, only its first characters."""

    id: str
    prefix: str
    owner_kind: Literal["user", "agent"] = Field(exclude=True)
    owner_id: str = Field(exclude=True)
    org_id: str
    created_at: Timestamp
    expires_at: Timestamp | None
    revoked: bool
    revoked_at: Timestamp | None

    @model_validator(mode="before")
    @classmethod
    def _from_json(cls, data: Any) -> Any:
        return unfolded(data, "owner")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def owner(self) -> KeyOwnerView:
        return KeyOwnerView(kind=self.owner_kind, id=self.owner_id)


class AgentView(View):
    id: str
    org_id: str
    name: str
    description: str
    kind: AgentKind
    model: str | None
    is_external: bool
    tools: list[Any]
    visibility: Visibility
    history_length: int | None
    url: str | None
    members: list[str] | None
    """A team's members (ids)."""
    a2a_url: str | None
    """Where it is served over A2A (null: an external agent)."""
    card_url: str | None
    created_at: Timestamp

    @classmethod
    def of(cls, row: AgentRecord, base_url: str) -> AgentView:
        a2a = None if row.is_external else agent_url(base_url, row.id)
        fields = {name: getattr(row, name) for name in _ROW_FIELDS}
        return cls.model_validate(
            {
                **fields,
                "members": row.spec.get("members") if row.kind == AgentKind.TEAM else None,
                "a2a_url": a2a,
                "card_url": None if a2a is None else f"{a2a}/.well-known/agent-card.json",
            }
        )


_ROW_FIELDS = (
    "id",
    "org_id",
    "name",
    "description",
    "kind",
    "model",
    "is_external",
    "tools",
    "visibility",
    "history_length",
    "url",
    "created_at",
)


class AgentDetail(AgentView):
    card: dict[str, Any] | None
    """The Agent Card it is served with (a remote agent's: as fetched)."""


class MeOrg(BaseModel):
    id: str
    name: str


class Me(BaseModel):
    kind: Literal["user", "agent"]
    id: str
    name: str
    role: Role | None
    """A person's role in the organization (null for agents)."""
    org: MeOrg


class NewUser(BaseModel):
    user: UserView
    api_key: str
    """Shown once: only its digest is stored."""


class NewOrganization(BaseModel):
    organization: OrganizationView
    owner: NewUser


class NewKey(BaseModel):
    key: KeyView
    api_key: str
    """Shown once: only its digest is stored."""


class Registered(BaseModel):
    agent: AgentView


class RegisteredExternal(Registered):
    api_key: str
    """The external agent's key, shown once: it reads its messages with it."""


class ErrorDetail(BaseModel):
    code: str
    """UPPER_CASE, from the one error table (docs/errors.md)."""
    message: str
    field: str | None
    """The input at fault (`rules[0].match`), or null."""
    retryAfter: float | None = None
    """Seconds to wait (429)."""
    trace: str | None = None
    """The server's traceback of an internal error (`--debug` only)."""


class ErrorBody(BaseModel):
    """Every error answer: `{"error": {"code", "message", "field"}}`."""

    error: ErrorDetail
