"""API keys -> the Principal behind them (a person or an agent of one organization).

The one lookup every entry uses, `KeyResolver`: it keeps each key's principal for a few
seconds, so a busy caller costs one query per TTL, not one per call (a WebSocket's key is
asked `fresh`, on opening and on each frame). A revoked key leaves the cache at once, on every
replica (catalog/changes.py); while this replica may not hear the others (its fan-out is cut
off), the cache answers nothing and every key is asked of the database. Every lookup goes
through `AuthFailures` first: an address that presented too many refused keys is answered 429
without a query.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from starlette.requests import HTTPConnection

from ranch.db.models import AgentRecord, ApiKey, User, iso
from ranch.exceptions import RateLimited, Unauthorized
from ranch.identity.cache import TtlCache
from ranch.identity.keys import digest
from ranch.identity.live import REVOKED, expired
from ranch.identity.principal import KeyHolder, Principal
from ranch.policy.ratelimit import RateLimiter

CHALLENGE = 'Bearer realm="ranch", ApiKey header="X-API-Key"'
"""The `WWW-Authenticate` value sent with every 401."""
KEY_REQUIRED = "an API key is required (Authorization: Bearer <key> or X-API-Key)"
KEY_CACHE_TTL = 5.0
KEY_CACHE_SIZE = 10_000


def presented_key(connection: HTTPConnection) -> str | None:
    """`Authorization: Bearer`, `X-API-Key`, or (WebSocket only) `?token=`."""
    header = connection.headers.get("authorization", "")
    if header[:7].lower() == "bearer ":
        return header[7:].strip() or None
    key = connection.headers.get("x-api-key")
    if key:
        return key.strip()
    if connection.scope["type"] == "websocket":
        return connection.query_params.get("token")
    return None


@dataclass(frozen=True)
class KnownKey:
    """What a valid key stands for: its principal (and the user object requests carry it as), and
    what can end it (revocation, expiry)."""

    principal: Principal
    key_id: str
    expires_at: float | None
    holder: KeyHolder = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "holder", KeyHolder(self.principal))

    def expired(self, at: float) -> bool:
        return self.expires_at is not None and at >= self.expires_at


async def principal_for(key: str, sessions: async_sessionmaker[AsyncSession]) -> Principal:
    """The owner of `key`, from the `api_keys` table (only SHA-256 digests are stored)."""
    return (await holder_of(key, sessions)).principal


async def holder_of(key: str, sessions: async_sessionmaker[AsyncSession]) -> KnownKey:
    """The key's row and owner; Unauthorized for an unknown, revoked or expired key."""
    async with sessions() as session:
        row = await session.scalar(select(ApiKey).where(ApiKey.digest == digest(key)))
        if row is None or row.revoked:
            raise Unauthorized("unknown or revoked API key")
        if row.expires_at is not None and time.time() >= row.expires_at:
            raise Unauthorized(f"the API key {row.prefix}… expired at {iso(row.expires_at)}")
        if row.owner_kind == "user":
            user = await session.get(User, row.owner_id)
            if user is None:
                raise Unauthorized("the key's user no longer exists")
            who = Principal("user", user.id, user.org_id, user.name, user.role, user.is_superuser)
        else:
            agent = await session.get(AgentRecord, row.owner_id)
            if agent is None:
                raise Unauthorized("the key's agent no longer exists")
            who = Principal("agent", agent.id, row.org_id, agent.name)
        return KnownKey(who, row.id, row.expires_at)


class AuthFailures:
    """Refused API keys per client address: checked before a key is looked up, spent on each refusal.

    A caller guessing keys costs a database query per guess; once its address's bucket is empty it
    gets 429 with `Retry-After` and no query at all. Callers presenting no key spend nothing (there
    is nothing to look up).
    """

    def __init__(self, limiter: RateLimiter | None) -> None:
        self.limiter = limiter

    async def check(self, address: str) -> None:
        """Raise RateLimited when `address` has used up its refused keys."""
        if self.limiter is None:
            return
        key = f"authfail:ip:{address}"
        decision = await self.limiter.peek(key)
        if not decision.allowed:
            raise RateLimited(key, decision.retry_after)

    async def refused(self, address: str) -> None:
        if self.limiter is not None:
            await self.limiter.check(f"authfail:ip:{address}")


def client_address(connection: HTTPConnection) -> str:
    """The client's address, as the failed-authentication budget and the rate limits key it."""
    client = connection.scope.get("client")
    return client[0] if client else "unknown"


class KeyResolver:
    """Keys -> principals, through the failed-authentication budget; keeps each key's principal for
    `ttl` seconds while `hearing()` (revocations made elsewhere reach this replica); `fresh` always
    asks the database (a WebSocket's key)."""

    def __init__(
        self,
        sessions: Callable[[], async_sessionmaker[AsyncSession]],
        ttl: float = KEY_CACHE_TTL,
        clock: Callable[[], float] = time.monotonic,
        failures: AuthFailures | None = None,
    ) -> None:
        self._sessions = sessions
        self.failures = failures or AuthFailures(None)
        self._known: TtlCache[str, KnownKey] = TtlCache(ttl, KEY_CACHE_SIZE, clock)
        """Principals by key digest; concurrent lookups of one key share one query."""
        self.hearing: Callable[[], bool] = lambda: True
        """Whether a key revoked on another replica is heard here at once (`Changes.follow` sets it
        to its fan-out's `connected`); while it is not, no key is served from the cache."""

    async def __call__(self, connection: HTTPConnection) -> Principal:
        return await self.resolve(_required_key(connection), client_address(connection))

    async def fresh(self, connection: HTTPConnection) -> Principal:
        """The key's principal from the database, never from the cache."""
        return (await self.fresh_key(connection)).principal

    async def fresh_key(self, connection: HTTPConnection) -> KnownKey:
        """`fresh`, answering what the key stands for: a connection that stays open registers its key
        id and expiry (`identity/live.py`)."""
        return await self.known(_required_key(connection), client_address(connection), fresh=True)

    async def resolve(self, key: str, address: str, *, fresh: bool = False) -> Principal:
        """The principal of `key`, presented from `address`; `fresh` skips the cache. Raises
        Unauthorized, or RateLimited once `address` has used up its refused keys."""
        return (await self.known(key, address, fresh=fresh)).principal

    def cached(self, key: str) -> KnownKey | None:
        """What `key` stands for, when the cache holds it unexpired: no query, nothing to await (the
        guard chain asks this first on every keyed A2A call); None sends the caller to `known`."""
        if not self.hearing():
            return None
        holder = self._known.peek(digest(key))
        if holder is None or holder.expired(time.time()):
            return None
        return holder

    async def known(self, key: str, address: str, *, fresh: bool = False) -> KnownKey:
        """`resolve`, answering what the key stands for (its principal and user object)."""
        name = digest(key)
        fresh = fresh or not self.hearing()  # revocations elsewhere may go unheard: ask the database
        holder = None if fresh else self._known.peek(name)
        if holder is not None:
            if not holder.expired(time.time()):
                return holder
            self._known.forget(name)  # expired since it was kept: the database says so
        await self.failures.check(address)  # before the query: a blocked address costs none
        try:
            if fresh:
                holder = await holder_of(key, self._sessions())
            else:  # callers of one key share its query; each spends its own address's budget
                holder = await self._known.get(name, lambda: holder_of(key, self._sessions()))
        except Unauthorized:  # unknown keys are never kept
            await self.failures.refused(address)
            raise
        return holder

    def forget(self, key_id: str) -> None:
        """A key was revoked: no entry serves it from the cache any more, starting now."""
        self._known.forget_where(lambda holder: holder.key_id == key_id)

    def forget_all(self) -> None:
        """Revocations may have been missed: every key is looked up again."""
        self._known.forget_all()

    async def ended(self, key_ids: list[str]) -> dict[str, Unauthorized]:
        """Which of `key_ids` no longer stand (revoked, expired, deleted), and why: one query, for a
        replica that may have missed revocations while connections stayed open."""
        if not key_ids:
            return {}
        async with self._sessions()() as session:
            rows = (await session.execute(select(ApiKey).where(ApiKey.id.in_(key_ids)))).scalars().all()
        found = {row.id: row for row in rows}
        at = time.time()
        reasons: dict[str, Unauthorized] = {}
        for key_id in key_ids:
            row = found.get(key_id)
            if row is None:
                reasons[key_id] = Unauthorized("the API key no longer exists")
            elif row.revoked:
                reasons[key_id] = Unauthorized(REVOKED)
            elif row.expires_at is not None and at >= row.expires_at:
                reasons[key_id] = expired(row.expires_at)
        return reasons


def _required_key(connection: HTTPConnection) -> str:
    key = presented_key(connection)
    if not key:
        raise Unauthorized(KEY_REQUIRED)
    return key
