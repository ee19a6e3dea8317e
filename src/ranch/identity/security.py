"""The hub's authentication settings as one object: keys, agent visibility, sessions.

With `Settings.auth == "keys"`, every A2A call must present a key of the hub's
`api_keys` table (`Authorization: Bearer <key>` or `X-API-Key`); the REST API and
the WebSocket always do. The key's principal becomes the A2A call context's user,
so tasks are scoped to it (anyone else gets TaskNotFound), and an agent registered
privately by one organization looks absent (AgentNotFound) to the others
(docs/policies.md, "Authentication").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from ranch.identity.live import LiveConnections
from ranch.identity.principal import Principal
from ranch.identity.resolver import AuthFailures, KeyResolver
from ranch.identity.sessions import RedisSessions, Sessions, SessionStore
from ranch.identity.visibility import AgentAccess


class ServedIds(Container[str], Protocol):
    """The ids a hub serves (the catalog): what `reachable` may answer yes to."""

    def ids(self) -> Iterable[str]: ...


@dataclass
class Security:
    """The hub's authentication and sessions, built from `Settings`."""

    mode: Literal["off", "keys"]
    served: ServedIds
    keys: KeyResolver
    access: AgentAccess
    sessions: SessionStore | None = None
    live: LiveConnections = field(default_factory=LiveConnections)
    """The WebSockets and event streams open in this process: a revoked or expired key ends them."""

    @property
    def enabled(self) -> bool:
        return self.mode == "keys"

    async def reachable(self, principal: Principal | None, agent_id: str) -> bool:
        return agent_id in self.served and await self.access.visible(principal, agent_id)

    def reachable_now(self, principal: Principal | None, agent_id: str) -> bool | None:
        """`reachable` from what is kept in memory, without awaiting; None when the agents table must
        be asked (call `reachable`). The guard chain runs this on every keyed A2A call."""
        if agent_id not in self.served:
            return False
        return self.access.visible_now(principal, agent_id)

    async def reachable_ids(self, principal: Principal | None) -> list[str]:
        return [agent_id for agent_id in self.served.ids() if await self.reachable(principal, agent_id)]


def build_security(
    mode: Literal["off", "keys"],
    served: ServedIds,
    sessions: Callable[[], async_sessionmaker[AsyncSession]],
    *,
    session_ttl: float | None,
    failures: AuthFailures | None = None,
    clock: Callable[[], float] = time.monotonic,
    redis_url: str | None = None,
    redis_prefix: str = "ranch",
) -> Security:
    """The hub's `Security`; `clock` times the key and visibility caches and the sessions kept in
    process, Redis keeps sessions (on the wall clock) for every replica when `redis_url` is given."""
    store: SessionStore | None = None
    if session_ttl and redis_url:
        store = RedisSessions.from_url(redis_url, session_ttl, prefix=redis_prefix)
    elif session_ttl:
        store = Sessions(session_ttl, clock=clock)
    return Security(
        mode=mode,
        served=served,
        keys=KeyResolver(sessions, clock=clock, failures=failures),
        access=AgentAccess(sessions, clock=clock),
        sessions=store,
    )
