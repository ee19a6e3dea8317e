"""The words the hub stores and shows, and its times: one vocabulary for tables, models and client.

The tables (db/models.py) store each member's value in a VARCHAR column, and the request and view
models (`rooms.requests`, `rooms.views`, `api.models`) parse and show the same members; they live
here, with no database import, so `ranch.client` reads the hub's models without loading SQLAlchemy.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from enum import StrEnum


def now() -> float:
    """Seconds since the epoch; stored as a float so SQLite and PostgreSQL sort alike."""
    return time.time()


def iso(timestamp: float) -> str:
    """A stored time as the API shows it: ISO 8601 in UTC, e.g. 2026-11-23T08:00:00.123456Z."""
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")


# -- each column holds the member's value, as the migrations made it (VARCHAR) --


class RoomType(StrEnum):
    DIRECT = "direct"
    GROUP = "group"
    TASK = "task"


class RoomStatus(StrEnum):
    ACTIVE = "active"
    """Messages are posted and agents woken."""
    ARCHIVED = "archived"
    """Read-only; its executions were completed."""
    CLOSED = "closed"
    """Read-only, ended for good; its executions were completed."""


class ParticipantKind(StrEnum):
    USER = "user"
    AGENT = "agent"
    TEAM = "team"


class Role(StrEnum):
    """A person's role in an organization, and anyone's in a room."""

    OWNER = "owner"
    ADMIN = "admin"
    MEMBER = "member"


class Visibility(StrEnum):
    """Who may use an agent (identity/visibility.py)."""

    PERSONAL = "personal"
    """Its organization's user who registered it."""
    ORG = "org"
    """Its organization."""
    GLOBAL = "global"
    """Every organization (config agents; the superuser's registrations)."""


class AgentKind(StrEnum):
    RULES = "rules"
    ECHO = "echo"
    REMOTE = "remote"
    LLM = "llm"
    PYTHON = "python"
    """From the config file only."""
    TEAM = "team"
    EXTERNAL = "external"
    """No A2A server: it reads its messages over the API (registered over REST only)."""


class AgentSource(StrEnum):
    CONFIG = "config"
    API = "api"


class MessageType(StrEnum):
    TEXT = "text"
    """Wakes the agents it addresses."""
    THOUGHT = "thought"
    ERROR = "error"
    TASK = "task"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"


class ExecutionStatus(StrEnum):
    """The statuses of an execution (their meaning and moves: rooms/adapters.py, docs/api.md)."""

    SUBMITTED = "submitted"
    WORKING = "working"
    READY = "ready"
    INPUT_REQUIRED = "input-required"
    HANDOFF = "handoff"
    """Delegated to another agent of the room: it waits for its child execution (`handoff_to`)."""
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"


class DeliveryStatus(StrEnum):
    PENDING = "pending"
    """Waiting for its agent (or, for an external agent, for its acknowledgement)."""
    RUNNING = "running"
    """Its agent is working on it."""
    DONE = "done"
    """Handled or acknowledged."""
