"""API keys -> the Principal behind them (a person or an agent of one organization)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from starlette.requests import HTTPConnection

from ranch.db.models import AgentRecord, ApiKey, User
from ranch.exceptions import Unauthorized
from ranch.rooms.access import Principal
from ranch.rooms.keys import digest


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
