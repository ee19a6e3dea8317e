"""The A2A call context of a request: what the guard chain left in its scope, as the SDK's handler reads it.

One builder, `call_context`, for every road: the fast path, ranch's JSON-RPC binding on the
full stack, and (through `ContextBuilder`) the a2a-sdk's dispatchers.
"""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from a2a.auth.user import UnauthenticatedUser, User
from a2a.extensions.common import HTTP_EXTENSION_HEADER, get_requested_extensions
from a2a.server.context import ServerCallContext
from a2a.server.routes import ServerCallContextBuilder
from a2a.server.routes.common import StarletteUser
from starlette.requests import Request
from starlette.types import Scope

from ranch.edge.guards import AGENT_KEY
from ranch.identity.principal import PRINCIPAL_KEY, KeyHolder
from ranch.wire.middleware import SCOPE_KEY

NO_EXTENSIONS: frozenset[str] = frozenset()
_NO_USER = UnauthenticatedUser()
_FIELDS = {"state", "user", "tenant", "requested_extensions"}
"""Every field is given: `model_construct` need not work out which were set."""


def call_context(
    scope: Scope, extensions: Set[str] = NO_EXTENSIONS, headers: dict[str, str] | None = None
) -> ServerCallContext:
    """The call context of a request the chain let through: its agent, principal and user, and the
    per-request scope dict the handler fills (`wire.middleware.SCOPE_KEY`).

    `headers` go in the state for the a2a-sdk's version checks (its dispatchers only).
    """
    state: dict[str, Any] = {
        AGENT_KEY: scope.get(AGENT_KEY, ""),
        SCOPE_KEY: scope.setdefault(SCOPE_KEY, {}),
        PRINCIPAL_KEY: scope.get(PRINCIPAL_KEY),
    }
    if headers is not None:
        state["headers"] = headers
    user = scope.get("user")
    if user is None:
        user = _NO_USER
    elif type(user) is not KeyHolder and not isinstance(user, User):  # a KeyHolder is the SDK's user already
        user = StarletteUser(user)
    return _construct(state, user, set(extensions))


def _construct(state: dict[str, Any], user: Any, extensions: set[str]) -> ServerCallContext:
    """The SDK's context, built through pydantic's public `model_construct` (no validation: every
    value is ranch's own). A quicker hand-made build once lived here; it was worth too little for
    what it reached into (bench/README.md, "Library first")."""
    return ServerCallContext.model_construct(
        _FIELDS, state=state, user=user, tenant="", requested_extensions=extensions
    )


def requested_extensions(request: Request) -> set[str]:
    """The extension URIs a request asks for in `A2A-Extensions`."""
    return get_requested_extensions(request.headers.getlist(HTTP_EXTENSION_HEADER))


def request_context(request: Request) -> ServerCallContext:
    """`call_context` of a full-stack request to ranch's own JSON-RPC binding."""
    return call_context(request.scope, requested_extensions(request))


class ContextBuilder(ServerCallContextBuilder):
    """`call_context` for the a2a-sdk's dispatchers, with the header copy their version checks read."""

    def build(self, request: Request) -> ServerCallContext:
        return call_context(request.scope, requested_extensions(request), dict(request.headers))
