"""API keys: only a SHA-256 digest is stored, so a leaked database leaks no key.

Keys are created for oneself, or by an organization's owner or admin for its users and agents;
each may expire, and each can be revoked. Listing shows a key's prefix, never the key.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    Strict,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from ranch.db.models import AgentRecord, ApiKey, User, now
from ranch.exceptions import NotFound
from ranch.identity.orgs import candidates
from ranch.identity.principal import Principal
from ranch.ids import new_id
from ranch.policy.fields import Body, Ref

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


class KeyOwner(Body):
    kind: Literal["user", "agent"]
    id: Ref
    """In full, or (as an organization names its own) the short name."""


def _one_owner(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """A malformed owner is refused as a whole: `owner` is the field at fault."""
    try:
        return handler(value)
    except ValidationError:
        raise PydanticCustomError("owner", 'must be {"kind": "user" | "agent", "id": "..."}') from None


def _moment(value: Any) -> Any:
    """An ISO 8601 time, UTC unless it names a zone (only strings: no epoch numbers)."""
    try:
        moment = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        moment = None
    if moment is None:
        raise PydanticCustomError("iso_time", "must be an ISO 8601 time, e.g. 2027-01-31T12:00:00Z")
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _ahead(moment: datetime) -> datetime:
    if not now() < moment.timestamp() <= now() + MAX_LIFETIME:
        raise PydanticCustomError("expiry", "must be in the future, within 10 years")
    return moment


class CreateKey(Body):
    """`POST /api/v1/keys`: whose key (the caller's when omitted), and when it expires (never)."""

    owner: Annotated[KeyOwner | None, WrapValidator(_one_owner)] = None
    """A user or agent of the caller's organization; only an owner or admin may name another."""
    expires_at: Annotated[datetime, BeforeValidator(_moment), AfterValidator(_ahead)] | None = None
    """When the key stops working: ISO 8601, UTC unless it says otherwise; at most 10 years ahead."""
    expires_in: Annotated[float, Strict(), Field(gt=0, le=MAX_LIFETIME)] | None = None
    """Seconds from now; instead of `expires_at`."""

    @model_validator(mode="before")
    @classmethod
    def _not_both(cls, data: Any) -> Any:
        """Checked first: with both given, neither one's own value is the problem."""
        if (
            isinstance(data, dict)
            and data.get("expires_at") is not None
            and data.get("expires_in") is not None
        ):
            both = PydanticCustomError("both", "give expires_at or expires_in, not both")
            detail = InitErrorDetails(type=both, loc=("expires_in",), input=data["expires_in"])
            raise ValidationError.from_exception_data(cls.__name__, [detail])
        return data

    def expiry(self) -> float | None:
        """Seconds since the epoch, or None: the key does not expire."""
        if self.expires_in is not None:
            return now() + self.expires_in
        return None if self.expires_at is None else self.expires_at.timestamp()


async def create(session: AsyncSession, who: Principal, request: CreateKey) -> tuple[ApiKey, str]:
    """`POST /api/v1/keys`: a key for the caller, or (owner/admin) for a user or agent of its org."""
    owner_kind, owner_id = await _owner(session, who, request.owner)
    return add_key(session, who.org_id, owner_kind, owner_id, expires_at=request.expiry())


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


async def _owner(session: AsyncSession, who: Principal, owner: KeyOwner | None) -> tuple[str, str]:
    if owner is None:
        return who.kind, who.id
    for owner_id in candidates(who.org_id, owner.id):
        if (owner.kind, owner_id) == (who.kind, who.id):
            return owner.kind, owner_id
    who.require_admin("create keys for others")
    table = User if owner.kind == "user" else AgentRecord
    for owner_id in candidates(who.org_id, owner.id):
        found: User | AgentRecord | None = await session.get(table, owner_id)
        if found is not None and found.org_id == who.org_id:
            return owner.kind, owner_id
    raise NotFound(f"no {owner.kind} '{owner.id}' in organization '{who.org_id}'", "owner.id")


async def issue_key(
    session: AsyncSession, org_id: str, owner_kind: str, owner_id: str, key: str | None = None
) -> str:
    """A new API key; only its digest is kept, so it is shown once."""
    return add_key(session, org_id, owner_kind, owner_id, key)[1]
