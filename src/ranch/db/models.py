"""The hub's tables (SQLAlchemy 2 ORM), one class per concept of seed 003.

Ids are strings: agents and organizations have readable slugs, everything
else a UUID from `ranch.ids`. Messages and events carry an integer `seq` from
the database: it is the cursor clients page and reconnect with, so it must
grow in commit order (one writer per room at a time; see rooms/bus.py).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Enum,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# The stored vocabularies and times live in protocol/vocabulary.py, which the request and view models and
# the client share without SQLAlchemy; each `from ranch.db.models import Role` reads them here as before.
from ranch.protocol.vocabulary import AgentKind as AgentKind
from ranch.protocol.vocabulary import AgentSource as AgentSource
from ranch.protocol.vocabulary import DeliveryStatus as DeliveryStatus
from ranch.protocol.vocabulary import ExecutionStatus as ExecutionStatus
from ranch.protocol.vocabulary import MessageType as MessageType
from ranch.protocol.vocabulary import ParticipantKind as ParticipantKind
from ranch.protocol.vocabulary import Role as Role
from ranch.protocol.vocabulary import RoomStatus as RoomStatus
from ranch.protocol.vocabulary import RoomType as RoomType
from ranch.protocol.vocabulary import Visibility as Visibility
from ranch.protocol.vocabulary import iso as iso
from ranch.protocol.vocabulary import now as now


def vocabulary(enum: type[StrEnum], length: int) -> Enum:
    """A column of `enum`'s values in a VARCHAR(`length`): reads give members; writes take both."""
    return Enum(
        enum,
        native_enum=False,
        create_constraint=False,
        length=length,
        values_callable=lambda members: [member.value for member in members],
        validate_strings=True,
    )


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON, list[Any]: JSON, list[str]: JSON}


class Organization(Base):
    """A tenant: its rooms, users, agents and keys are invisible to every other one."""

    __tablename__ = "organizations"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    allowed_agent_urls: Mapped[list[str]] = mapped_column(default=list)
    """URL prefixes its agents may call with `call_remote_agent` (and register as remote agents)."""
    created_at: Mapped[float] = mapped_column(Float, default=now)


class User(Base):
    __tablename__ = "users"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    role: Mapped[Role] = mapped_column(vocabulary(Role, 16), default=Role.MEMBER)
    """Within the organization."""
    is_superuser: Mapped[bool] = mapped_column(Boolean, default=False)
    """May create organizations (the bootstrap user)."""
    created_at: Mapped[float] = mapped_column(Float, default=now)


class ApiKey(Base):
    """A key for a person or an agent; only its SHA-256 is stored."""

    __tablename__ = "api_keys"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), index=True)
    owner_kind: Mapped[str] = mapped_column(String(8))
    """user | agent"""
    owner_id: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[float] = mapped_column(Float, default=now)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    revoked_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    expires_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    """Past this time the key answers 401 on every entry; None = it does not expire."""
    parent_id: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    """The key its holder made this one with: it never outlives that key and is revoked with it.
    None for a key made by an owner or admin, at sign-up or at an agent's registration."""

    __table_args__ = (
        Index("api_keys_owner", "owner_kind", "owner_id"),
        Index(
            "api_keys_revoked_at",
            "revoked_at",
            sqlite_where=text("revoked_at IS NOT NULL"),
            postgresql_where=text("revoked_at IS NOT NULL"),
        ),
        Index(
            "api_keys_expires_at",
            "expires_at",
            sqlite_where=text("expires_at IS NOT NULL"),
            postgresql_where=text("expires_at IS NOT NULL"),
        ),
    )


class AgentRecord(Base):
    """An agent or team the hub knows: from the config file, or registered over REST."""

    __tablename__ = "agents"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, default="")
    kind: Mapped[AgentKind] = mapped_column(vocabulary(AgentKind, 16))
    model: Mapped[str | None] = mapped_column(String(200), nullable=True)
    is_external: Mapped[bool] = mapped_column(Boolean, default=False)
    """Brings its own model and has no A2A server: it reads messages over the API."""
    tools: Mapped[list[Any]] = mapped_column(default=list)
    visibility: Mapped[Visibility] = mapped_column(vocabulary(Visibility, 16), default=Visibility.ORG)
    owner_user_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    history_length: Mapped[int | None] = mapped_column(Integer, nullable=True)
    url: Mapped[str | None] = mapped_column(String(2000), nullable=True)
    card: Mapped[dict[str, Any] | None] = mapped_column(nullable=True)
    card_fetched_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    card_ttl: Mapped[float] = mapped_column(Float, default=300.0)
    spec: Mapped[dict[str, Any]] = mapped_column(default=dict)
    """The agent's config entry (as in the YAML file), so the hub can rebuild it after a restart."""
    source: Mapped[AgentSource] = mapped_column(vocabulary(AgentSource, 8), default=AgentSource.API)
    created_at: Mapped[float] = mapped_column(Float, default=now)


class Room(Base):
    """A conversation shared by people and agents; its id is the A2A contextId."""

    __tablename__ = "rooms"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), index=True)
    type: Mapped[RoomType] = mapped_column(vocabulary(RoomType, 8), default=RoomType.GROUP)
    status: Mapped[RoomStatus] = mapped_column(vocabulary(RoomStatus, 10), default=RoomStatus.ACTIVE)
    title: Mapped[str] = mapped_column(String(300), default="")
    default_agent: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_by: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[float] = mapped_column(Float, default=now)
    last_event: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), default=0, server_default="0"
    )
    """The cursor of the room's newest event: the room's own count, kept under the room's row lock."""


class Participant(Base):
    __tablename__ = "participants"
    room_id: Mapped[str] = mapped_column(ForeignKey("rooms.id", ondelete="CASCADE"), primary_key=True)
    kind: Mapped[ParticipantKind] = mapped_column(vocabulary(ParticipantKind, 8), primary_key=True)
    ref: Mapped[str] = mapped_column(String(64), primary_key=True)
    role: Mapped[Role] = mapped_column(vocabulary(Role, 8), default=Role.MEMBER)
    joined_at: Mapped[float] = mapped_column(Float, default=now)


class RoomMessage(Base):
    __tablename__ = "messages"
    seq: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    id: Mapped[str] = mapped_column(String(64), unique=True)
    room_id: Mapped[str] = mapped_column(ForeignKey("rooms.id", ondelete="CASCADE"))
    type: Mapped[MessageType] = mapped_column(vocabulary(MessageType, 12), default=MessageType.TEXT)
    sender_kind: Mapped[str] = mapped_column(String(8))
    """user | agent | team | system"""
    sender_id: Mapped[str] = mapped_column(String(64))
    text: Mapped[str] = mapped_column(Text, default="")
    """Its text parts, joined by newlines (what mentions, history and search read)."""
    parts: Mapped[list[Any] | None] = mapped_column(nullable=True, default=None)
    """Its A2A parts as A2A JSON (`{"text"}`, `{"raw", "mediaType", "filename"}`, `{"url", ...}`,
    `{"data"}`); None for one text part, which `text` is."""
    mentions: Mapped[list[str]] = mapped_column(default=list)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", default=dict)
    thread_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    execution_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """The execution that wrote it (agent messages)."""
    created_at: Mapped[float] = mapped_column(Float, default=now)
    __table_args__ = (
        Index("messages_room_seq", "room_id", "seq"),
        Index("messages_created", "created_at"),  # retention's read (migration 0015)
    )


class Execution(Base):
    """One agent's long-lived work in one room; served to A2A clients as a Task (rooms/tasks.py)."""

    __tablename__ = "executions"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    room_id: Mapped[str] = mapped_column(ForeignKey("rooms.id", ondelete="CASCADE"))
    agent_id: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(vocabulary(ExecutionStatus, 16), default=ExecutionStatus.SUBMITTED)
    """An `ExecutionStatus` (the column takes no other word); typed `str` for the writers of plain words."""
    reason: Mapped[str] = mapped_column(Text, default="")
    """Why it is in its status (the error of a failed one)."""
    tool_calls: Mapped[list[Any]] = mapped_column(default=list)
    turns: Mapped[int] = mapped_column(Integer, default=0)
    parent_execution_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """The execution that handed this one its work (migration 0018); it is woken when this one ends."""
    handoff_to: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """The child execution it handed off to and waits for; None once that one ended."""
    created_at: Mapped[float] = mapped_column(Float, default=now)
    updated_at: Mapped[float] = mapped_column(Float, default=now)
    __table_args__ = (
        Index("executions_room_agent", "room_id", "agent_id"),
        Index("executions_parent", "parent_execution_id"),
        Index(  # migration 0016: a post finds its agent's open execution without reading the ended ones
            "executions_open",
            "room_id",
            "agent_id",
            "created_at",
            sqlite_where=text("status NOT IN ('completed', 'failed', 'canceled')"),
            postgresql_where=text("status NOT IN ('completed', 'failed', 'canceled')"),
        ),
    )


OPEN_EXECUTION = text("status NOT IN ('completed', 'failed', 'canceled')")
"""The executions not yet ended, written as the partial index `executions_open` is (a read must
say it the same way, with no parameters, for the planner to use that index)."""


class Delivery(Base):
    """A room message handed to one agent; external agents acknowledge theirs."""

    __tablename__ = "deliveries"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    message_seq: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"))
    room_id: Mapped[str] = mapped_column(ForeignKey("rooms.id", ondelete="CASCADE"))
    agent_id: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(vocabulary(DeliveryStatus, 8), default=DeliveryStatus.PENDING)
    """A `DeliveryStatus` (the column takes no other word); typed `str` for the writers of plain words."""
    runner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """The replica that queued it and will run it; when that replica is gone, another takes it."""
    trace: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """The `traceparent` of the request that posted the message (tracing on): its turn joins that trace."""
    created_at: Mapped[float] = mapped_column(Float, default=now)
    __table_args__ = (
        Index("deliveries_agent_status", "agent_id", "status", "message_seq"),
        Index("deliveries_room_agent", "room_id", "agent_id", "message_seq"),
        Index("deliveries_room_agent_status", "room_id", "agent_id", "status", "message_seq"),
        Index("deliveries_status_runner", "status", "runner"),
        Index("deliveries_status_message", "status", "message_seq"),  # retention; the take-over's order
    )


class RoomEvent(Base):
    """Everything watchers see, in each room's order; `cursor` is the room's own count (the WebSocket
    reconnect cursor of that room). `seq` only identifies the row: it orders nothing across rooms."""

    __tablename__ = "events"
    seq: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    room_id: Mapped[str] = mapped_column(ForeignKey("rooms.id", ondelete="CASCADE"))
    cursor: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"))
    type: Mapped[str] = mapped_column(String(32))
    data: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[float] = mapped_column(Float, default=now)
    __table_args__ = (
        Index("events_room_cursor", "room_id", "cursor", unique=True),
        Index("events_created", "created_at"),  # retention's read (migration 0015)
    )


class Replica(Base):
    """One running process of a hub (a replica): who it is, and when it last said it was alive."""

    __tablename__ = "replicas"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[float] = mapped_column(Float, default=now)
    heartbeat_at: Mapped[float] = mapped_column(Float, default=now)
    """Written every few seconds; a replica silent for longer than the lease is gone."""


class PrunedEvents(Base):
    """How far retention pruned a room's events: a WebSocket cursor older than `through` cannot be
    resumed (the events after it are gone), and is told to resume from `through`."""

    __tablename__ = "pruned_events"
    room_id: Mapped[str] = mapped_column(ForeignKey("rooms.id", ondelete="CASCADE"), primary_key=True)
    through: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"))
    """The newest cursor among the room's pruned events."""


class Lease(Base):
    """Work one replica at a time does in turns (retention's rounds): who holds the turn, until when."""

    __tablename__ = "leases"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str] = mapped_column(String(64))
    """The replica whose turn it is (or was)."""
    until: Mapped[float] = mapped_column(Float)
    """Seconds since the epoch; from then on the next turn is anyone's."""


# -- tables written with SQLAlchemy Core (protobuf bodies; one prebuilt upsert per save) --

ranch_tasks = Table(
    "ranch_tasks",
    Base.metadata,
    Column("id", String(255), primary_key=True),
    Column("owner", String(255), nullable=False, default=""),
    Column("context_id", String(255), nullable=False, default=""),
    Column("state", String(32), nullable=False),
    Column("updated_ns", BigInteger, nullable=True),
    Column("body", LargeBinary, nullable=False),
    Column("runner", String(64), nullable=True),
    Index("ranch_tasks_owner_updated", "owner", "updated_ns", "id"),
    Index("ranch_tasks_owner_context_updated", "owner", "context_id", "updated_ns", "id"),
    Index("ranch_tasks_owner_state_updated", "owner", "state", "updated_ns", "id"),
    Index("ranch_tasks_state_updated", "state", "updated_ns"),
    Index(
        "ranch_tasks_runner",
        "runner",
        sqlite_where=text("runner IS NOT NULL"),
        postgresql_where=text("runner IS NOT NULL"),
    ),
)
"""A2A tasks (and room executions): the task's protobuf encoding, what ListTasks filters on, and
`runner`: the process driving it while it is SUBMITTED or WORKING (NULL when none of ours is:
it ended, waits for input, or waits on an external agent). Each ListTasks filter has an index that
ends in (updated_ns, id), its order; the runner index holds only the driven tasks (the take-over
loop's read); (state, updated_ns) finds the finished tasks past their lifetime (retention)."""

ranch_task_counts = Table(
    "ranch_task_counts",
    Base.metadata,
    Column("owner", String(255), primary_key=True),
    Column("state", String(32), primary_key=True),
    Column("tasks", BigInteger, nullable=False, server_default="0"),
)
"""How many tasks each owner has in each state, kept by triggers on `ranch_tasks` (migration 0016):
ListTasks' `totalSize` without counting the owner's tasks on every call."""

push_configs = Table(
    "ranch_push_configs",
    Base.metadata,
    Column("task_id", String(255), primary_key=True),
    Column("id", String(255), primary_key=True),
    Column("owner", String(255), nullable=False, default=""),
    Column("body", LargeBinary, nullable=False),
)
"""Webhook configs per task (tasks/push.py)."""

team_conversations = Table(
    "team_conversations",
    Base.metadata,
    Column("team_id", String(64), primary_key=True),
    Column("owner", String(255), primary_key=True),
    Column("context_id", String(255), primary_key=True),
    Column("version", BigInteger, nullable=False, default=0),
    Column("state", JSON, nullable=False),
    Column("updated_at", Float, nullable=False, default=now),
    Index("team_conversations_updated", "updated_at"),
)
"""A team conversation (routing/context.py) by (team, owner, contextId): its transcript, how far
each member has read, and the member waiting for input; `version` counts the turns that wrote it,
so a replica holding an older copy in memory reads it again."""

member_sessions = Table(
    "member_sessions",
    Base.metadata,
    Column("agent_id", String(64), primary_key=True),
    Column("owner", String(255), primary_key=True),
    Column("context_id", String(255), primary_key=True),
    Column("remote_context_id", String(255), nullable=False, default=""),
    Column("waiting_task_id", String(255), nullable=False, default=""),
    Column("updated_at", Float, nullable=False, default=now),
    Index("member_sessions_updated", "updated_at"),
)
"""A remote member's own ids for one owner's contextId (agents/remote.py): its context, and its
task while that task waits for input, so a follow-up after a restart continues it."""

turn_checkpoints = Table(
    "turn_checkpoints",
    Base.metadata,
    Column("task_id", String(255), primary_key=True),
    Column("owner", String(255), nullable=False, default=""),
    Column("team_id", String(64), nullable=False),
    Column("state", JSON, nullable=False),
    Column("updated_at", Float, nullable=False, default=now),
    Index("turn_checkpoints_updated", "updated_at"),
)
"""Where a team turn in flight is (routing/durable.py): written when each hop starts, deleted with the
task's end, so the replica that takes over a stopped replica's task resumes the turn from there."""

push_outbox = Table(
    "push_outbox",
    Base.metadata,
    Column("seq", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("task_id", String(255), nullable=False),
    Column("runner", String(255), nullable=False),
    Column("body", LargeBinary, nullable=False),
    Column("created_at", Float, nullable=False, default=now),
    Index("push_outbox_runner", "runner"),
)
"""Push notifications on their way (tasks/push.py): written before they are sent, removed once
sent (or given up), so the updates a replica that died was sending are sent by another."""
