"""Which agents a principal may use: global ones, its organization's, its own personal ones.

One rule, two forms: `usable_agents` is the SQL condition (listings, registration of
teams and participants), `AgentAccess.visible` the same rule in Python over a row kept
a few seconds (every A2A call and `/mcp` asks it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, or_, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from ranch.db.models import AgentRecord, Visibility
from ranch.exceptions import NotFound
from ranch.identity.cache import TtlCache
from ranch.identity.orgs import candidates
from ranch.identity.principal import Principal

ACCESS_CACHE_TTL = 5.0
ACCESS_CACHE_SIZE = 10_000


def usable_agents(principal: Principal) -> Any:
    """SQL condition: the agents the caller's organization may use."""
    return or_(
        AgentRecord.visibility == Visibility.GLOBAL,
        and_(AgentRecord.org_id == principal.org_id, AgentRecord.visibility == Visibility.ORG),
        and_(
            AgentRecord.org_id == principal.org_id,
            AgentRecord.visibility == Visibility.PERSONAL,
            or_(AgentRecord.owner_user_id == principal.id, AgentRecord.owner_user_id.is_(None)),
        ),
    )


def may_use(principal: Principal | None, visibility: str, org_id: str, owner_user_id: str | None) -> bool:
    """`usable_agents`, for one row, in Python (callers without a key reach global agents only)."""
    if visibility == Visibility.GLOBAL:
        return True
    if principal is None or principal.org_id != org_id:
        return False
    return visibility == Visibility.ORG or owner_user_id in (None, principal.id)


async def usable_agent(session: AsyncSession, principal: Principal, agent_id: str, field: str) -> AgentRecord:
    row = await session.scalar(
        select(AgentRecord).where(AgentRecord.id == agent_id, usable_agents(principal))
    )
    if row is None:
        raise NotFound(f"no agent or team '{agent_id}'", field)
    return row


async def named_agent(session: AsyncSession, principal: Principal, name: str, field: str) -> AgentRecord:
    """The usable agent `name` stands for: the organization's own `<org>.<name>` first, then `name`."""
    for agent_id in candidates(principal.org_id, name):
        row = await session.scalar(
            select(AgentRecord).where(AgentRecord.id == agent_id, usable_agents(principal))
        )
        if row is not None:
            return row
    raise NotFound(f"no agent or team '{name}'", field)


@dataclass(frozen=True)
class _Visibility:
    visibility: str
    org_id: str
    owner_user_id: str | None


class AgentAccess:
    """Which served agents a principal may reach; the `agents` table's answer, kept a few seconds."""

    def __init__(
        self,
        sessions: Callable[[], async_sessionmaker[AsyncSession]],
        ttl: float = ACCESS_CACHE_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sessions = sessions
        self._rows: TtlCache[str, _Visibility | None] = TtlCache(ttl, ACCESS_CACHE_SIZE, clock)

    async def visible(self, principal: Principal | None, agent_id: str) -> bool:
        row = self._rows.peek(agent_id)
        if row is None:
            row = await self._rows.get(agent_id, lambda: self._read(agent_id), keep=_recorded)
        return _visible(principal, row)

    def visible_now(self, principal: Principal | None, agent_id: str) -> bool | None:
        """`visible` from the row kept in memory; None when there is none (ask `visible`)."""
        row = self._rows.peek(agent_id)
        return None if row is None else _visible(principal, row)

    async def _read(self, agent_id: str) -> _Visibility | None:
        async with self._sessions()() as session:
            record = await session.get(AgentRecord, agent_id)
        return None if record is None else _Visibility(record.visibility, record.org_id, record.owner_user_id)

    def forget(self, agent_id: str) -> None:
        self._rows.forget(agent_id)

    def forget_all(self) -> None:
        self._rows.forget_all()


def _visible(principal: Principal | None, row: _Visibility | None) -> bool:
    if row is None:  # served but not recorded (yet): never shown to callers without a key
        return principal is not None
    return may_use(principal, row.visibility, row.org_id, row.owner_user_id)


def _recorded(row: _Visibility | None) -> bool:
    return row is not None  # an agent not recorded yet may be in a moment: ask again next time
