"""The guard chain every HTTP request passes once, before its road is chosen.

trace id -> key (behind the failed-authentication limit) -> agent exists and is visible ->
rate limits -> body limit. The chain reads the ASGI scope and its headers only, never a
`Request`, and leaves what it decided in the scope (the principal, Starlette's `user`, the
agent id, the trace id), the way starlette's `AuthenticationMiddleware` does: the fast path,
the full Starlette stack and the a2a-sdk's dispatchers all read that, and none checks again.
A refusal is a ranch error; `refusal` answers it in the format of the binding the request came
in on (JSON-RPC with the request's id, A2A HTTP+JSON, or the REST API's).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import Scope

from ranch.catalog.cards import API_CARDS_PATH, CARD_FILE, CATALOG_PATH, TENANTS_PATH, WELL_KNOWN_AGENTS_PATH
from ranch.exceptions import AgentNotFound, BodyTooLarge, InvalidInput, RateLimited, Unauthorized
from ranch.identity.principal import PRINCIPAL_KEY, Principal
from ranch.identity.resolver import KEY_REQUIRED, KnownKey
from ranch.identity.security import Security
from ranch.policy.ratelimit import RatePolicy
from ranch.wire.cards import AGENTS_PATH
from ranch.wire.errors import (
    a2a_rest_error_body,
    headers_for,
    http_status_for,
    jsonrpc_error_body,
    rest_error_body,
)

AGENT_KEY = "ranch.agent"
"""Where the agent a request names is kept in the scope (and in the A2A call state)."""
TRACE_KEY = "ranch.trace_id"
"""Where the request's trace id is kept in the scope."""
AGENT_PREFIX = AGENTS_PATH + "/"
TENANT_PREFIX = TENANTS_PATH + "/"
TENANT_FIELD = "params.tenant"
CARD_PATHS = (".well-known/agent-card.json", ".well-known/agent.json")
API_CARD_PREFIX = API_CARDS_PATH + "/"
API_CARD_SUFFIX = "/" + CARD_FILE
WELL_KNOWN_PREFIX = WELL_KNOWN_AGENTS_PATH + "/"
API_PATH = "/api/"
MCP_PATH = "/mcp"
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_READ = frozenset(
    {b"content-length", b"a2a-version", b"traceparent", b"authorization", b"x-api-key", b"a2a-extensions"}
)
"""The headers the chain reads; it passes over the rest."""


class Entry(enum.Enum):
    """Which of the server's entries a request is for: it decides the guards and the error format."""

    A2A = "a2a"
    """An agent's bindings: JSON-RPC or HTTP+JSON, A2A 1.0 or 0.3."""
    CARD = "card"
    """An agent's card: public, but a key presented is checked."""
    AGENTS = "agents"
    """The agent list at /a2a/agents: public, but a key presented is checked."""
    MCP = "mcp"
    API = "api"
    """The REST API: its routes say which need a key (taken from the key cache, as on A2A)."""
    OTHER = "other"
    """Health, the page, the JWKS, unknown paths: a trace id and the body limit only."""


KEYED = frozenset({Entry.A2A, Entry.MCP})
"""Entries that need a key when the server runs with `--auth keys`."""


@dataclass(slots=True)
class Call:
    """What the chain reads off one request's line and headers, once."""

    method: str
    path: str
    entry: Entry
    agent_id: str
    jsonrpc: bool
    """Refusals are JSON-RPC error responses (A2A JSON-RPC, /mcp)."""
    client: str
    """The client's address: the failed-authentication budget and anonymous callers' rate bucket."""
    traceparent: str | None = None
    key: str | None = None
    length: int | None = None
    """The Content-Length; None when it is missing (a chunked body) or not a number."""
    fast: bool = False
    """A plain A2A 1.0 JSON-RPC POST with a Content-Length and no extensions: the fast path may take it."""
    known: KnownKey | None = None
    """What the key stood for when `check` let the request in: a stream registers with it
    (`edge/ending.py`) without looking the key up again."""
    tenant_in_body: bool = False
    """JSON-RPC at /a2a: the agent is the body's `params.tenant` (`tenant_of`), read before `check`."""


class Guards:
    """The chain: `read` parses a request's head, `check` guards it, leaving its decisions in the scope."""

    def __init__(
        self,
        *,
        security: Security,
        rates: RatePolicy,
        max_body: int,
        root: str | None = None,
        root_routes: Sequence[BaseRoute] = (),
    ) -> None:
        self.security = security
        self.rates = rates
        self.max_body = max_body
        self.root = root
        self._root_paths = [route.path_regex for route in root_routes if isinstance(route, Route)]
        """`--root`: the HTTP+JSON paths the root agent is served at too."""

    def read(self, scope: Scope) -> Call:
        path: str = scope["path"]
        method: str = scope["method"]
        client = scope.get("client")
        call = Call(method, path, Entry.OTHER, "", False, client[0] if client else "unknown")
        self._classify(call)
        version = b""
        bearer = api_key = None
        extensions = False
        for name, value in scope["headers"]:
            if name not in _READ:
                continue  # host, content-type, user-agent ...: one set lookup each
            if name == b"content-length":
                call.length = int(value) if value.isdigit() else None
            elif name == b"a2a-version":
                version = value
            elif name == b"traceparent":
                call.traceparent = value.decode("latin-1")
            elif name == b"authorization":
                if value[:7].lower() == b"bearer ":
                    bearer = value[7:].strip().decode("latin-1") or None
            elif name == b"x-api-key":
                api_key = value.strip().decode("latin-1") or None
            elif name == b"a2a-extensions":
                extensions = True  # the full stack negotiates them and echoes the activated ones
        call.key = bearer or api_key
        call.fast = (
            call.jsonrpc
            and call.entry is Entry.A2A
            and method == "POST"
            and version.startswith(b"1")
            and call.length is not None
            and not extensions
        )
        return call

    def _classify(self, call: Call) -> None:
        path = call.path
        if path.startswith(AGENT_PREFIX):
            agent_id, _, tail = path[len(AGENT_PREFIX) :].partition("/")
            if agent_id:
                call.agent_id = agent_id
                call.entry = Entry.CARD if tail in CARD_PATHS else Entry.A2A
                call.jsonrpc = tail == ""
        elif path.startswith(API_PATH):
            if not self._api_card(call, path):
                call.entry = Entry.API
        elif path.startswith(WELL_KNOWN_PREFIX) and path.endswith(".json"):
            agent_id = path[len(WELL_KNOWN_PREFIX) : -len(".json")]
            if agent_id and "/" not in agent_id:  # seed 003's option C
                call.agent_id, call.entry = agent_id, Entry.CARD
        elif path == MCP_PATH:
            call.entry, call.jsonrpc = Entry.MCP, True
        elif path == AGENTS_PATH or path == CATALOG_PATH:  # lists: public, a key presented is checked
            call.entry = Entry.AGENTS
        elif path == TENANTS_PATH:
            if call.method == "POST":  # (GET /a2a is no route: a 405, not a JSON-RPC call)
                call.entry, call.jsonrpc, call.tenant_in_body = Entry.A2A, True, True
        elif path.startswith(TENANT_PREFIX) and self._tenanted(call, path[len(TENANT_PREFIX) :]):
            pass
        elif self.root is not None:
            self._classify_root(call)

    @staticmethod
    def _api_card(call: Call, path: str) -> bool:
        """/api/v1/agents/{id}/.well-known/agent-card.json (seed 003's option B): a card, guarded as one."""
        if not (path.startswith(API_CARD_PREFIX) and path.endswith(API_CARD_SUFFIX)):
            return False
        agent_id = path[len(API_CARD_PREFIX) : -len(API_CARD_SUFFIX)]
        if not agent_id or "/" in agent_id:
            return False
        call.agent_id, call.entry = agent_id, Entry.CARD
        return True

    @staticmethod
    def _tenanted(call: Call, rest: str) -> bool:
        """/a2a/{tenant}/...: the HTTP+JSON binding of the agent `tenant` names."""
        tenant, _, tail = rest.partition("/")
        if not tenant or not tail:
            return False
        call.agent_id, call.entry = tenant, Entry.A2A
        return True

    def _classify_root(self, call: Call) -> None:
        """`--root`: JSON-RPC at POST /, the card and HTTP+JSON at the root too."""
        path = call.path
        if path == "/":
            if call.method != "POST":
                return  # GET / is the page
            call.entry, call.jsonrpc = Entry.A2A, True
        elif path.startswith("/.well-known/") and path[1:] in CARD_PATHS:
            call.entry = Entry.CARD
        elif any(pattern.match(path) for pattern in self._root_paths):
            call.entry = Entry.A2A
        else:
            return
        assert self.root is not None
        call.agent_id = self.root

    async def check(self, call: Call, scope: Scope) -> None:
        """Raise the ranch error that refuses `call`; else leave the principal and agent in `scope`."""
        entry = call.entry
        if entry is not Entry.OTHER:
            known = self._known_now(call)  # a cached key needs no await, nor does a kept visibility row
            principal: Principal | None
            if known is not None:
                call.known = known
                scope[PRINCIPAL_KEY] = principal = known.principal
                scope["user"] = known.holder
            else:
                principal = await self._principal(call, scope)
            if call.agent_id:
                reachable = self._reachable_now(call.agent_id, principal)
                if reachable is not True:
                    await self._refuse_unless_reachable(call.agent_id, principal, reachable)
                scope[AGENT_KEY] = call.agent_id
            if self.rates.enabled:
                key, decision = await self.rates.admit(caller_key(principal, call.client), call.agent_id)
                if not decision.allowed:
                    raise RateLimited(key, decision.retry_after)
        if call.length is not None and call.length > self.max_body:
            raise BodyTooLarge(call.length, self.max_body)

    def _known_now(self, call: Call) -> KnownKey | None:
        """The presented key's cached entry on an entry that takes keys (the REST API; A2A, cards and
        /mcp with `--auth keys`); None when `_principal` must decide. A revoked key is dropped from
        the cache at once (`Changes.key_revoked`, on every replica), and an expired one is never
        served from it: a REST call costs no query for its key, and is refused as soon as before."""
        if call.key is None or not (self.security.enabled or call.entry is Entry.API):
            return None
        return self.security.keys.cached(call.key)

    async def _principal(self, call: Call, scope: Scope) -> Principal | None:
        """The key's principal, put where Starlette and the a2a-sdk look for the user."""
        security = self.security
        api = call.entry is Entry.API
        if not (security.enabled or api):
            return None  # without `--auth keys`, A2A, cards and /mcp take no keys
        if call.key is None:
            if call.entry in KEYED:
                raise Unauthorized(KEY_REQUIRED)
            return None  # cards and the list show what callers without a key may see
        known = await security.keys.known(call.key, call.client)  # `_known_now` missed
        call.known = known
        scope[PRINCIPAL_KEY] = principal = known.principal
        scope["user"] = known.holder
        return principal

    def _reachable_now(self, agent_id: str, principal: Principal | None) -> bool | None:
        """Whether the caller may reach `agent_id`, from memory alone; None when the agents table must
        be asked. Without `--auth keys`, any served agent."""
        security = self.security
        if security.enabled:
            return security.reachable_now(principal, agent_id)
        return agent_id in security.served

    async def _refuse_unless_reachable(
        self, agent_id: str, principal: Principal | None, reachable: bool | None
    ) -> None:
        """AgentNotFound, unless the agents table says the caller may reach it after all (`reachable`
        None); the same answer for an unknown id and another organization's agent, listing only the
        ids the caller may reach."""
        security = self.security
        if reachable is None:
            reachable = await security.reachable(principal, agent_id)
        if not reachable:
            known = (
                await security.reachable_ids(principal) if security.enabled else list(security.served.ids())
            )
            raise AgentNotFound(agent_id, known)


def caller_key(principal: Principal | None, address: str = "unknown") -> str:
    """Who is calling, for rate buckets: `user:<id>` or `agent:<id>` with a key, else `ip:<address>`."""
    return f"{principal.kind}:{principal.id}" if principal is not None else f"ip:{address}"


def principal_of(scope: Scope) -> Principal:
    """The caller's principal, as the chain left it in the scope; Unauthorized when there is none."""
    principal: Principal | None = scope.get(PRINCIPAL_KEY)
    if principal is None:
        raise Unauthorized(KEY_REQUIRED)
    return principal


def refusal(call: Call, error: Exception, request_id: str | int | None = None) -> Response:
    """`error` in the format of the binding `call` came in on, with its status and headers."""
    body: dict[str, Any]
    if call.jsonrpc:
        body = jsonrpc_error_body(error, request_id)
    elif call.entry is Entry.API:
        body = rest_error_body(error)
    else:
        body = a2a_rest_error_body(error)
    return JSONResponse(body, status_code=http_status_for(error), headers=headers_for(error))


def tenant_of(body: bytes) -> str | None:
    """The `params.tenant` of a JSON-RPC body: the agent it names; "" when the body is not JSON
    (the binding answers that with a parse error); InvalidInput when it names none."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return ""
    params = data.get("params") if isinstance(data, dict) else None
    tenant = params.get("tenant") if isinstance(params, dict) else None
    if not isinstance(tenant, str) or not tenant:
        raise InvalidInput(
            f"{TENANT_FIELD} is required at {TENANTS_PATH}: the id of the agent or team to call "
            f"(or call it at {AGENT_PREFIX}<id>)",
            field=TENANT_FIELD,
        )
    return tenant


def request_id_of(body: bytes) -> str | int | None:
    """The JSON-RPC `id` of a request body, to answer an error with (None when there is none)."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    value = data.get("id") if isinstance(data, dict) else None
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None
