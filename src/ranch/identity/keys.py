"""API keys: only a SHA-256 digest is stored, so a leaked database leaks no key.

Keys are created for oneself, or by an organization's owner or admin for its users and agents;
each may expire, and each can be revoked. Listing shows a key's prefix, never the key.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from ranch.db.models import AgentRecord, ApiKey, User, now
from ranch.exceptions import InvalidInput, NotFound
from ranch.identity.principal import Principal
from ranch.ids import new_id

MAX_LIFETIME = 10 * 365 * 24 * 3600.0
"""The furthest ahead a key's expiry may be set, in seconds."""


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def add_key(
    session: AsyncSession,
    org_id: str,
    owner_kind: str,
    owner_id: str,
    key: str | None = None,
    expires_at: float | None = None,
) -> tuple[ApiKey, str]:
    """A new key row (added to `session`) and the key itself, which is shown once."""
    key = key or f"rk_{secrets.token_urlsafe(24)}"
    row = ApiKey(
        id=new_id(),
        digest=digest(key),
        prefix=key[:7],
        org_id=org_id,
        owner_kind=owner_kind,
        owner_id=owner_id,
        created_at=now(),
        revoked=False,
        expires_at=expires_at,
    )
    session.add(row)
    return row, key


async def create(session: AsyncSession, who: Principal, body: dict[str, Any]) -> tuple[ApiKey, str]:
    """`POST /api/v1/keys`: a key for the caller, or (owner/admin) for a user or agent of its org."""
    owner_kind, owner_id = await _owner(session, who, body.get("owner"))
    expires_at = _expiry(body)
    return add_key(session, who.org_id, owner_kind, owner_id, expires_at=expires_at)


async def listed(session: AsyncSession, who: Principal) -> list[ApiKey]:
    """The caller's own keys; an owner or admin sees every key of its organization."""
    query = select(ApiKey).where(ApiKey.org_id == who.org_id)
    if not who.is_admin:
        query = query.where(ApiKey.owner_kind == who.kind, ApiKey.owner_id == who.id)
    return list((await session.scalars(query.order_by(ApiKey.created_at, ApiKey.id))).all())


async def revoke(session: AsyncSession, who: Principal, key_id: str) -> ApiKey:
    """Revoke one key: the caller's own, or (owner/admin) any of its organization's."""
    row = await session.get(ApiKey, key_id)
    mine = row is not None and row.owner_kind == who.kind and row.owner_id == who.id
    if row is None or row.org_id != who.org_id or not (mine or who.is_admin):
        raise NotFound(f"no API key '{key_id}'", "key_id")
    if not row.revoked:
        row.revoked, row.revoked_at = True, now()
    return row


async def _owner(session: AsyncSession, who: Principal, owner: Any) -> tuple[str, str]:
    if owner is None:
        return who.kind, who.id
    if (
        not isinstance(owner, dict)
        or owner.get("kind") not in ("user", "agent")
        or not isinstance(owner.get("id"), str)
    ):
        raise InvalidInput('owner must be {"kind": "user" | "agent", "id": "..."}', "owner")
    kind, owner_id = owner["kind"], owner["id"]
    if (kind, owner_id) == (who.kind, who.id):
        return kind, owner_id
    who.require_admin("create keys for others")
    found: User | AgentRecord | None = await session.get(User if kind == "user" else AgentRecord, owner_id)
    if found is None or found.org_id != who.org_id:
        raise NotFound(f"no {kind} '{owner_id}' in organization '{who.org_id}'", "owner.id")
    return kind, owner_id


def _expiry(body: dict[str, Any]) -> float | None:
    """`expires_at` (ISO 8601, UTC unless it says otherwise) or `expires_in` (seconds), or None."""
    at, within = body.get("expires_at"), body.get("expires_in")
    if at is not None and within is not None:
        raise InvalidInput("give expires_at or expires_in, not both", "expires_in")
    if within is not None:
        if isinstance(within, bool) or not isinstance(within, int | float) or not 0 < within <= MAX_LIFETIME:
            raise InvalidInput(
                f"expires_in must be a number of seconds, above 0 and at most {MAX_LIFETIME:g}", "expires_in"
            )
        return now() + float(within)
    if at is None:
        return None
    try:
        moment = datetime.fromisoformat(at) if isinstance(at, str) else None
    except ValueError:
        moment = None
    if moment is None:
        raise InvalidInput("expires_at must be an ISO 8601 time, e.g. 2027-01-31T12:00:00Z", "expires_at")
    stamp = (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
    if not now() < stamp <= now() + MAX_LIFETIME:
        raise InvalidInput("expires_at must be in the future, within 10 years", "expires_at")
    return stamp


async def issue_key(
    session: AsyncSession, org_id: str, owner_kind: str, owner_id: str, key: str | None = None
) -> str:
    """A new API key; only its digest is kept, so it is shown once."""
    return add_key(session, org_id, owner_kind, owner_id, key)[1]
