"""The JSON shapes of docs/api.md, one function per object."""

from __future__ import annotations

from typing import Any

from ranch.db.models import (
    AgentRecord,
    ApiKey,
    Delivery,
    Execution,
    Organization,
    Participant,
    Room,
    RoomMessage,
    User,
    iso,
)
from ranch.wire.cards import agent_url


def organization(org: Organization) -> dict[str, Any]:
    return {
        "id": org.id,
        "name": org.name,
        "allowed_agent_urls": org.allowed_agent_urls,
        "created_at": iso(org.created_at),
    }


def user(row: User) -> dict[str, Any]:
    return {
        "id": row.id,
        "org_id": row.org_id,
        "name": row.name,
        "role": row.role,
        "created_at": iso(row.created_at),
    }


def api_key(row: ApiKey) -> dict[str, Any]:
    """A key as listed: never the key itself, only its first characters."""
    return {
        "id": row.id,
        "prefix": row.prefix,
        "owner": {"kind": row.owner_kind, "id": row.owner_id},
        "org_id": row.org_id,
        "created_at": iso(row.created_at),
        "expires_at": iso(row.expires_at) if row.expires_at is not None else None,
        "revoked": row.revoked,
        "revoked_at": iso(row.revoked_at) if row.revoked_at is not None else None,
    }


def agent(row: AgentRecord, base_url: str) -> dict[str, Any]:
    a2a = agent_url(base_url, row.id)
    return {
        "id": row.id,
        "org_id": row.org_id,
        "name": row.name,
        "description": row.description,
        "kind": row.kind,
        "model": row.model,
        "is_external": row.is_external,
        "tools": row.tools,
        "visibility": row.visibility,
        "history_length": row.history_length,
        "url": row.url,
        "members": row.spec.get("members") if row.kind == "team" else None,
        "a2a_url": None if row.is_external else a2a,
        "card_url": None if row.is_external else f"{a2a}/.well-known/agent-card.json",
        "created_at": iso(row.created_at),
    }


def room(row: Room) -> dict[str, Any]:
    return {
        "id": row.id,
        "org_id": row.org_id,
        "type": row.type,
        "status": row.status,
        "title": row.title,
        "default_agent": row.default_agent,
        "created_by": row.created_by,
        "created_at": iso(row.created_at),
    }


def participant(row: Participant, name: str | None = None) -> dict[str, Any]:
    return {
        "kind": row.kind,
        "id": row.ref,
        "role": row.role,
        "name": name or row.ref,
        "joined_at": iso(row.joined_at),
    }


def message(row: RoomMessage) -> dict[str, Any]:
    return {
        "id": row.id,
        "cursor": row.seq,
        "room_id": row.room_id,
        "type": row.type,
        "sender": {"kind": row.sender_kind, "id": row.sender_id},
        "text": row.text,
        "mentions": row.mentions,
        "metadata": row.meta,
        "thread_id": row.thread_id,
        "execution_id": row.execution_id,
        "created_at": iso(row.created_at),
    }


def execution(row: Execution) -> dict[str, Any]:
    return {
        "id": row.id,
        "room_id": row.room_id,
        "agent_id": row.agent_id,
        "status": row.status,
        "reason": row.reason,
        "turns": row.turns,
        "tool_calls": row.tool_calls,
        "created_at": iso(row.created_at),
        "updated_at": iso(row.updated_at),
    }


def delivery(row: Delivery, message_row: RoomMessage) -> dict[str, Any]:
    """What an external agent receives for a message addressed to it."""
    return {
        "type": "delivery",
        "delivery_id": row.id,
        "room_id": row.room_id,
        "message": message(message_row),
    }
