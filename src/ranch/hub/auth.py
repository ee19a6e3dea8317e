"""API keys on the A2A bindings, the agent cards and `/mcp` (docs/policies.md, "Authentication").

With `Settings.auth == "keys"`, every A2A call must present a key of the hub's
`api_keys` table (`Authorization: Bearer <key>` or `X-API-Key`); the REST API and
the WebSocket always do. The key's principal becomes the A2A call context's user,
so tasks are scoped to it (anyone else gets TaskNotFound), and an agent registered
privately by one organization looks absent (AgentNotFound) to the others. Like the
rate limits, `require_key` wraps endpoints, so the fast path passes through it too.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from starlette.authentication import BaseUser
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response

from ranch.api.auth import CHALLENGE, AuthFailures, KeyResolver, presented_key
from ranch.db.models import AgentRecord
from ranch.exceptions import AgentNotFound, RateLimited, Unauthorized
from ranch.hub.edge import request_id_of
from ranch.policy.sessions import Sessions
from ranch.rooms.access import Principal
from ranch.wire.errors import error_body, headers_for, http_status_for
from ranch.wire.signing import CardSigner

if TYPE_CHECKING:
    from ranch.hub.registry import Registry

Endpoint = Callable[[Request], Awaitable[Response]]
PRINCIPAL_KEY = "ranch.principal"
"""Where the authenticated principal is kept in the ASGI scope (and in the A2A call state)."""
ACCESS_CACHE_TTL = 5.0


class KeyHolder(BaseUser):
    """A principal as Starlette's (and so the a2a-sdk's) user; its name is the tasks' owner."""

    def __init__(self, principal: Principal) -> None:
        self.principal = principal

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def display_name(self) -> str:
        # user and agent ids live in different tables: the prefix keeps an agent from owning a user's tasks
        who = self.principal
        return who.id if who.kind == "user" else f"agent:{who.id}"


def session_caller(principal: Principal | None) -> str:
    """The caller half of a session key: the same on A2A and the REST API."""
    return "anonymous" if principal is None else f"{principal.kind}:{principal.id}"


@dataclass
class _Row:
    visibility: str
    org_id: str
    owner_user_id: str | None
    fetched: float


class AgentAccess:
    """Which served agents a principal may reach; the `agents` table's answer, kept a few seconds."""

    def __init__(
        self, sessions: Callable[[], async_sessionmaker[AsyncSession]], ttl: float = ACCESS_CACHE_TTL
    ) -> None:
        self._sessions = sessions
        self._ttl = ttl
        self._rows: dict[str, _Row] = {}

    async def visible(self, principal: Principal | None, agent_id: str) -> bool:
        row = self._rows.get(agent_id)
        if row is None or time.monotonic() - row.fetched > self._ttl:
            async with self._sessions()() as session:
                record = await session.get(AgentRecord, agent_id)
            if record is None:  # served but not recorded (yet): never shown to callers without a key
                return principal is not None
            row = _Row(record.visibility, record.org_id, record.owner_user_id, time.monotonic())
            self._rows[agent_id] = row
        if row.visibility == "global":
            return True
        if principal is None or principal.org_id != row.org_id:
            return False
        return row.visibility == "org" or row.owner_user_id in (None, principal.id)

    def forget(self, agent_id: str) -> None:
        self._rows.pop(agent_id, None)


@dataclass
class Security:
    """The hub's authentication, sessions and card signing, built from `Settings`."""

    mode: Literal["off", "keys"]
    registry: Registry
    keys: KeyResolver
    access: AgentAccess
    sessions: Sessions | None = None
    signer: CardSigner | None = None

    @property
    def enabled(self) -> bool:
        return self.mode == "keys"

    async def reachable(self, principal: Principal | None, agent_id: str) -> bool:
        return agent_id in self.registry and await self.access.visible(principal, agent_id)

    async def reachable_ids(self, principal: Principal | None) -> list[str]:
        return [agent_id for agent_id in self.registry.ids() if await self.reachable(principal, agent_id)]

    async def principal(self, connection: HTTPConnection, *, optional: bool = False) -> Principal | None:
        """The caller's principal; None without a key when `optional`. Raises Unauthorized."""
        if optional and not presented_key(connection):
            return None
        principal = await self.keys(connection)
        connection.scope["user"] = KeyHolder(principal)
        connection.scope[PRINCIPAL_KEY] = principal
        return principal


def require_key(security: Security, endpoint: Endpoint, *, optional: bool = False) -> Endpoint:
    """Answer 401 without a valid key, and AgentNotFound for an agent the caller may not see.

    `optional` lets callers without a key through (agent cards), but only to global agents.
    """
    if not security.enabled:
        return endpoint

    async def authenticated(request: Request) -> Response:
        try:
            principal = await security.principal(request, optional=optional)
        except (Unauthorized, RateLimited) as exc:  # RateLimited: too many refused keys from this address
            return await refuse(request, exc)
        agent_id = request.path_params.get("agent_id", "")
        if agent_id and not await security.reachable(principal, agent_id):
            # the same answer for an unknown id and another organization's agent; only reachable ids listed
            error = AgentNotFound(agent_id, await security.reachable_ids(principal))
            return await refuse(request, error)
        return await endpoint(request)

    return authenticated


async def refuse(request: Request, error: Exception) -> Response:
    """`error` in the format of the A2A binding the request came in on; 401s carry the challenge."""
    request_id = request_id_of(await request.body()) if request.method == "POST" else None
    headers = {"WWW-Authenticate": CHALLENGE} if isinstance(error, Unauthorized) else headers_for(error)
    return JSONResponse(
        error_body(request.url.path, error, request_id),
        status_code=http_status_for(error),
        headers=headers,
    )


def build_security(
    mode: Literal["off", "keys"],
    registry: Registry,
    sessions: Callable[[], async_sessionmaker[AsyncSession]],
    *,
    session_ttl: float | None,
    signing_key: str | None,
    failures: AuthFailures | None = None,
) -> Security:
    """The hub's `Security`; an unreadable signing key fails here, at start-up, naming the file."""
    return Security(
        mode=mode,
        registry=registry,
        keys=KeyResolver(sessions, failures=failures),
        access=AgentAccess(sessions),
        sessions=Sessions(session_ttl) if session_ttl else None,
        signer=CardSigner.from_file(signing_key) if signing_key else None,
    )
