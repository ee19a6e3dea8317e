"""API keys -> the Principal behind them (a person or an agent of one organization).

The one lookup every entry uses: the REST API and the WebSocket call `authenticate`
on each request; the A2A bindings and `/mcp` go through `KeyResolver`, which keeps
each key's principal for a few seconds so a busy caller costs one query per TTL,
not one per call (a revoked key therefore stops working within `ttl` seconds).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from starlette.requests import HTTPConnection

from ranch.db.models import AgentRecord, ApiKey, User
from ranch.exceptions import Unauthorized
from ranch.rooms.access import Principal
from ranch.rooms.keys import digest

CHALLENGE = 'Bearer realm="ranch", ApiKey header="X-API-Key"'
"""The `WWW-Authenticate` value sent with every 401."""
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


async def authenticate(connection: HTTPConnection, sessions: async_sessionmaker[AsyncSession]) -> Principal:
    key = presented_key(connection)
    if not key:
        raise Unauthorized("an API key is required (Authorization: Bearer <key> or X-API-Key)")
    return await principal_for(key, sessions)


async def principal_for(key: str, sessions: async_sessionmaker[AsyncSession]) -> Principal:
    """The owner of `key`, from the `api_keys` table (only SHA-256 digests are stored)."""
    async with sessions() as session:
        row = await session.scalar(
            select(ApiKey).where(ApiKey.digest == digest(key), ApiKey.revoked.is_(False))
        )
        if row is None:
            raise Unauthorized("unknown or revoked API key")
        if row.owner_kind == "user":
            user = await session.get(User, row.owner_id)
            if user is None:
                raise Unauthorized("the key's user no longer exists")
            return Principal("user", user.id, user.org_id, user.name, user.role, user.is_superuser)
        agent = await session.get(AgentRecord, row.owner_id)
        if agent is None:
            raise Unauthorized("the key's agent no longer exists")
        return Principal("agent", agent.id, row.org_id, agent.name)


class KeyResolver:
    """`authenticate` with a short memory: key digest -> principal for `ttl` seconds."""

    def __init__(
        self,
        sessions: Callable[[], async_sessionmaker[AsyncSession]],
        ttl: float = KEY_CACHE_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sessions = sessions
        self._ttl = ttl
        self._clock = clock
        self._known: OrderedDict[str, tuple[float, Principal]] = OrderedDict()

    async def __call__(self, connection: HTTPConnection) -> Principal:
        key = presented_key(connection)
        if not key:
            raise Unauthorized("an API key is required (Authorization: Bearer <key> or X-API-Key)")
        name = digest(key)
        cached = self._known.get(name)
        now = self._clock()
        if cached is not None and now - cached[0] < self._ttl:
            return cached[1]
        principal = await principal_for(key, self._sessions())  # unknown keys are never cached
        self._known[name] = (now, principal)
        self._known.move_to_end(name)
        while len(self._known) > KEY_CACHE_SIZE:
            self._known.popitem(last=False)
        return principal
