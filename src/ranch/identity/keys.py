"""API keys: only a SHA-256 digest is stored, so a leaked database leaks no key.

Keys are created for oneself, or by an organization's owner or admin for its users and agents;
each may expire, and each can be revoked. Listing shows a key's prefix, never the key.

A key made for oneself is made with one's own key, its parent: it never expires after it and is
revoked with it, so a short-lived or revoked key leaves no longer-lived one behind. No one holds
more than `MAX_LIVE_KEYS` keys that still work.
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
from sqlalchemy import Select, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from ranch.db.models import AgentRecord, ApiKey, User, iso, now
from ranch.exceptions import Conflict, InvalidInput, NotFound, Unauthorized
from ranch.identity.orgs import candidates
from ranch.identity.principal import Principal
from ranch.ids import new_id
from ranch.policy.fields import Body, Ref

MAX_LIFETIME = 10 * 365 * 24 * 3600.0
"""The furthest ahead a key's expiry may be set, in seconds."""
MAX_LIVE_KEYS = 20
"""The most keys one user or agent may hold that are neither revoked nor expired."""


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def add_key(
    session: AsyncSession,
    org_id: str,
    owner_kind: str,
    owner_id: str,
    key: str | None = None,
    expires_at: float | None = None,
    parent_id: str | None = None,
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
        parent_id=parent_id,
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


async def create(
    session: AsyncSession,
    who: Principal,
    request: CreateKey,
    presented: str | None,
    most: int = MAX_LIVE_KEYS,
) -> tuple[ApiKey, str]:
    """`POST /api/v1/keys`: a key for the caller, or (owner/admin) for a user or agent of its org.

    A key for the caller is made with `presented`, the key the caller called with: see `_within`.
    The owner may hold at most `most` live keys, this one included.
    """
    owner_kind, owner_id = await _owner(session, who, request.owner)
    expires_at, parent_id = request.expiry(), None
    if (owner_kind, owner_id) == (who.kind, who.id):
        parent = await _making_key(session, presented)
        expires_at, parent_id = _within(parent, request), parent.id
    await _under_cap(session, owner_kind, owner_id, most, named=request.owner is not None)
    return add_key(session, who.org_id, owner_kind, owner_id, expires_at=expires_at, parent_id=parent_id)


async def _making_key(session: AsyncSession, presented: str | None) -> ApiKey:
    """The caller's own key, locked until the new key is committed: revoking it meanwhile waits, then
    finds the new key among those to revoke with it (or, revoked first, refuses the new key here)."""
    query = select(ApiKey).where(ApiKey.digest == digest(presented or "")).with_for_update()
    row = await session.scalar(query)
    if row is None or row.revoked or (row.expires_at is not None and now() >= row.expires_at):
        raise Unauthorized("unknown or revoked API key")
    return row


def _within(parent: ApiKey, request: CreateKey) -> float | None:
    """The expiry of a key made with `parent`: as asked, never later than `parent`'s (a later one is
    refused, naming the field that asked for it); none asked is `parent`'s."""
    asked = request.expiry()
    if asked is None or parent.expires_at is None:
        return parent.expires_at if asked is None else asked
    if asked > parent.expires_at:
        field = "expires_in" if request.expires_in is not None else "expires_at"
        raise InvalidInput(
            f"{field} is past {iso(parent.expires_at)}, when the key making this one expires; "
            "a key made with a key never outlives it",
            field,
        )
    return asked


async def _under_cap(session: AsyncSession, kind: str, owner_id: str, most: int, *, named: bool) -> None:
    """Conflict once the owner holds `most` keys that still work: revoke one to make another."""
    live = await session.scalar(
        select(func.count())
        .select_from(ApiKey)
        .where(
            ApiKey.owner_kind == kind,
            ApiKey.owner_id == owner_id,
            ApiKey.revoked.is_(False),
            or_(ApiKey.expires_at.is_(None), ApiKey.expires_at > now()),
        )
    )
    if live is not None and live >= most:
        raise Conflict(
            f"{kind} '{owner_id}' holds {live} live API keys, the most one may hold ({most}); "
            "revoke one to make another",
            "owner" if named else None,
        )


async def listed(session: AsyncSession, who: Principal) -> list[ApiKey]:
    """The caller's own keys; an owner or admin sees every key of its organization."""
    query = select(ApiKey).where(ApiKey.org_id == who.org_id)
    if not who.is_admin:
        query = query.where(ApiKey.owner_kind == who.kind, ApiKey.owner_id == who.id)
    return list((await session.scalars(query.order_by(ApiKey.created_at, ApiKey.id))).all())


async def revoke(session: AsyncSession, who: Principal, key_id: str) -> tuple[ApiKey, list[str]]:
    """Revoke one key (the caller's own, or, for an owner/admin, any of its organization's) and
    every key made with it, and with those; answers the key and the ids the caches must forget."""
    row = await session.get(ApiKey, key_id)
    mine = row is not None and row.owner_kind == who.kind and row.owner_id == who.id
    if row is None or row.org_id != who.org_id or not (mine or who.is_admin):
        raise NotFound(f"no API key '{key_id}'", "key_id")
    at = now()
    _revoke_row(row, at)
    await session.flush()  # locked before its children are read: one made with it meanwhile is among them
    return row, [row.id, *await _revoke_all(session, _made_with([row.id]), at)]


async def revoke_owned(session: AsyncSession, owner_kind: str, owner_id: str) -> list[str]:
    """Revoke every key of a user or agent that is being removed (a later one of the same id must not
    inherit them); answers the ids the caches must forget."""
    query = select(ApiKey).where(ApiKey.owner_kind == owner_kind, ApiKey.owner_id == owner_id)
    return await _revoke_all(session, query.where(ApiKey.revoked.is_(False)), now())


def _made_with(parent_ids: list[str]) -> Select[ApiKey]:
    return select(ApiKey).where(ApiKey.parent_id.in_(parent_ids))


async def _revoke_all(session: AsyncSession, query: Select[ApiKey], at: float) -> list[str]:
    """Revoke the keys `query` picks and, level by level, the keys made with them; their ids."""
    revoked: list[str] = []
    while rows := list((await session.scalars(query)).all()):
        for row in rows:
            _revoke_row(row, at)
        revoked += [row.id for row in rows]
        query = _made_with([row.id for row in rows])
    return revoked


def _revoke_row(row: ApiKey, at: float) -> None:
    if not row.revoked:
        row.revoked, row.revoked_at = True, at


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
