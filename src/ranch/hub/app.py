"""`create_app(config)`: the Starlette app serving every agent and team of a config.

The lifespan opens, in order: the shared outbound client pool, the agents (their
MCP connections), the task store (SQLite by default), the task group that owns
every run, and the hub's services (the /mcp session manager); it closes them in
reverse. The layout is docs/surface (README): cards, JSON-RPC and HTTP+JSON per
agent under /a2a/agents/{id}, and every agent and team as MCP tools at /mcp.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Literal

import anyio
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_rest_routes
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from ranch._version import __version__
from ranch.agents.base import gather_infos
from ranch.api.routes import routes as api_routes
from ranch.catalog.cards import served_card
from ranch.catalog.registry import Registry
from ranch.config import RanchConfig
from ranch.db import migrate
from ranch.db.engine import SQLITE_BUSY_TIMEOUT_S, open_engine
from ranch.edge.guards import (
    Endpoint,
    check_list_query,
    first_event_first,
    guard_agent,
    lean_edge,
    limit_rate,
    require_key,
    rooted,
    trace_requests,
    well_formed,
)
from ranch.exceptions import ConfigError
from ranch.hub.mcp import mcp_routes
from ranch.hub.serving import (
    ContextBuilder,
    RanchRequestHandler,
    call_context,
    explained,
    scope_context,
)
from ranch.identity.principal import PRINCIPAL_KEY
from ranch.identity.resolver import AuthFailures
from ranch.identity.security import build_security
from ranch.identity.sessions import DEFAULT_SESSION_TTL
from ranch.policy.egress import GuardedTransport
from ranch.policy.limits import DEFAULT_MAX_MESSAGE_BYTES, Limits
from ranch.policy.ratelimit import Rate, build_policy
from ranch.policy.ssrf import UrlGuard
from ranch.rooms.gateway import Gateway
from ranch.rooms.runtime import RoomsRuntime
from ranch.rooms.runtime import start as start_rooms
from ranch.routing.team import Team
from ranch.tasks.engine import TaskCore, fail_unfinished, owner_of
from ranch.tasks.push import PushConfigStore, PushNotifier, PushSender, webhook_client
from ranch.tasks.store import SqlTaskStore
from ranch.web import web_routes
from ranch.wire.cards import AGENTS_PATH, agent_url, declare_security
from ranch.wire.client import ClientPool, TransportFactory
from ranch.wire.errors import http_error_body
from ranch.wire.fastpath import FastPathApp
from ranch.wire.jsonrpc import JsonRpcEndpoint
from ranch.wire.middleware import ActivatedExtensions, BodyLimit
from ranch.wire.signing import CardSigner

logger = logging.getLogger(__name__)

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///ranch.db"
DEFAULT_MAX_BODY = 1024 * 1024


@dataclass
class Settings:
    """How one server runs; the CLI fills these from flags and environment."""

    database_url: str = DEFAULT_DATABASE_URL
    max_body_bytes: int = DEFAULT_MAX_BODY
    jsonrpc: Literal["lean", "sdk"] = "lean"
    """`sdk` serves A2A 1.0 JSON-RPC through the a2a-sdk's dispatcher too (slower; for comparison)."""
    admin_key: str | None = None
    """The bootstrap admin's API key (RANCH_ADMIN_KEY); None = generate one and print it once."""
    demo: bool = False
    """Create the demo user (key rk_demo) and the demo room with the config's first team."""
    announce: Callable[[str], None] = print
    """Where start-up notices for people go (the admin key, the demo room)."""
    # -- policies (docs/policies.md) --
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    """Largest message a caller may send (its encoded size), on every binding."""
    caller_rate: float | None = 50.0
    """Requests per second per caller (user, else client address); None = unlimited."""
    caller_burst: int = 100
    agent_rate: float | None = 500.0
    """Requests per second per served agent or team, all callers together; None = unlimited."""
    agent_burst: int = 1000
    redis_url: str | None = None
    """Keep rate-limit buckets in Redis (shared by replicas) instead of in this process."""
    allow_private_outbound: bool = False
    """Let what tenants steer (push webhooks, their agents' URLs, cards, model providers and MCP
    servers) reach loopback and private addresses; local development only. Config agents always may."""
    auth_failure_rate: float | None = 1.0
    """Refused API keys per second per client address, refilled; checked before a key is looked up,
    so a guessing address gets 429 without costing a query. None = unlimited."""
    auth_failure_burst: int = 20
    allow_loopback_webhooks: bool = False
    """The old name of `allow_private_outbound` (either one turns it on)."""
    card_timeout: float = 5.0
    """Seconds to fetch a remote agent's card; a failed fetch is remembered for 30 s."""
    max_card_bytes: int = 512 * 1024
    """Largest remote agent card ranch reads."""
    max_reply_bytes: int | None = None
    """Largest reply a member may give (its folded parts); None = `max_message_bytes`."""
    guard: UrlGuard | None = None
    """The outbound URL guard to use instead of one built from `allow_private_outbound` (embedding, tests)."""
    debug: bool = False
    """Full messages and timings in the logs (still scrubbed); details of internal errors."""
    # -- authentication (docs/policies.md) --
    auth: Literal["off", "keys"] = "off"
    """`keys`: every A2A call and /mcp need an API key, like the REST API (cards stay public)."""
    session_ttl: float | None = DEFAULT_SESSION_TTL
    """Seconds a (caller, context) session lives without use; None = no sessions."""
    signing_key: str | None = None
    """A PEM private key file: every served agent card carries a JWS signature made with it."""
    # -- layout and storage (docs/surface.md) --
    root: str | None = None
    """Also serve this agent at the root: its card at /.well-known/agent-card.json, its bindings at /."""
    sqlite_busy_timeout: float = SQLITE_BUSY_TIMEOUT_S
    """Seconds a SQLite write waits for another connection's lock before it fails (and is retried)."""
    clock: Callable[[], float] = time.monotonic
    """The seconds that session TTLs and in-process rate limits count (Redis buckets count Redis's);
    embedding code and tests may pass a clock of their own."""

    def limits(self) -> Limits:
        return Limits(max_message_bytes=self.max_message_bytes)

    def url_guard(self) -> UrlGuard:
        if self.guard is not None:
            return self.guard
        return UrlGuard(allow_loopback=self.allow_private_outbound or self.allow_loopback_webhooks)

    def client_pool(self, transport: TransportFactory | None = None) -> ClientPool:
        """An outbound pool with these card and reply limits; `transport` judges connections (tenants)."""
        return ClientPool(
            transport=transport,
            card_timeout=self.card_timeout,
            max_card_bytes=self.max_card_bytes,
            max_reply_bytes=self.max_reply_bytes or self.max_message_bytes,
        )

    def failures(self) -> Rate | None:
        """The refused-keys budget per client address (docs/policies.md)."""
        return Rate(self.auth_failure_rate, self.auth_failure_burst) if self.auth_failure_rate else None

    def rates(self) -> tuple[Rate | None, Rate | None]:
        caller = Rate(self.caller_rate, self.caller_burst) if self.caller_rate else None
        agent = Rate(self.agent_rate, self.agent_burst) if self.agent_rate else None
        return caller, agent


class Hub:
    """The parts one server shares; `core` exists while the app's lifespan runs."""

    def __init__(self, config: RanchConfig, settings: Settings) -> None:
        self.settings = settings
        self.guard = settings.url_guard()
        self.pool = settings.client_pool()
        self.tenant_pool = settings.client_pool(lambda: GuardedTransport(self.guard))
        self.registry = Registry(config, self.pool, self.tenant_pool)
        self.config = config
        self.services: list[Callable[[], AbstractAsyncContextManager[None]]] = []
        """More things the lifespan runs, entered after the task core (the /mcp session manager)."""
        self.rates = build_policy(
            *settings.rates(),
            redis_url=settings.redis_url,
            failures=settings.failures(),
            clock=settings.clock,
        )
        self.security = build_security(
            settings.auth,
            self.registry,
            lambda: self.rooms.sessions,
            session_ttl=settings.session_ttl,
            failures=AuthFailures(self.rates.failures),
            clock=settings.clock,
        )
        self.signer = CardSigner.from_file(settings.signing_key) if settings.signing_key else None
        """Signs every served card; an unreadable key fails here, at start-up, naming the file."""
        self._core: TaskCore | None = None
        self._rooms: RoomsRuntime | None = None
        self._gateway: Gateway | None = None

    @property
    def core(self) -> TaskCore:
        if self._core is None:
            raise RuntimeError("the ranch app was not started (its lifespan did not run)")
        return self._core

    @property
    def gateway(self) -> Gateway | None:
        return self._gateway

    @property
    def rooms(self) -> RoomsRuntime:
        if self._rooms is None:
            raise RuntimeError("the ranch app was not started (its lifespan did not run)")
        return self._rooms

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            stack.push_async_callback(self.pool.aclose)
            stack.push_async_callback(self.tenant_pool.aclose)
            stack.push_async_callback(self.registry.aclose)
            stack.push_async_callback(self.rates.aclose)
            await self.registry.open()
            engine = open_engine(self.settings.database_url, busy_timeout=self.settings.sqlite_busy_timeout)
            stack.push_async_callback(engine.dispose)
            store = SqlTaskStore(engine, owner_resolver=owner_of)
            await migrate.upgrade(engine)
            recovered = await fail_unfinished(store)
            if recovered:
                logger.warning("marked %d task(s) left unfinished by a previous run as failed", recovered)
            push_store = PushConfigStore(engine, owner_resolver=owner_of)
            await push_store.initialize()
            webhooks = await stack.enter_async_context(webhook_client(self.guard))
            group = await stack.enter_async_context(anyio.create_task_group())
            push = PushNotifier(push_store, PushSender(webhooks), group)
            self._core = TaskCore(store, group, push)
            self._rooms = await start_rooms(
                engine,
                self.config,
                self.registry,
                group,
                admin_key=self.settings.admin_key,
                demo=self.settings.demo,
                announce=self.settings.announce,
                limits=self.settings.limits(),
            )
            self._gateway = Gateway(self._rooms)
            for service in self.services:
                await stack.enter_async_context(service())
            try:
                yield
            finally:
                group.cancel_scope.cancel()
                self._core = None
                self._rooms = None
                self._gateway = None


def create_app(config: RanchConfig, settings: Settings | None = None) -> Starlette:
    """Every agent and team of `config` as an A2A server (JSON-RPC and HTTP+JSON)."""
    hub = Hub(config, settings or Settings())
    root = hub.settings.root
    if root is not None and root not in hub.registry:
        known = ", ".join(hub.registry.ids()) or "none"
        raise ConfigError([f"--root {root}: no agent or team '{root}' in the config (known: {known})"])
    handler = RanchRequestHandler(
        hub.registry,
        lambda: hub.core,
        hub.settings.limits(),
        hub.guard,
        lambda: hub.gateway,
        sessions=hub.security.sessions,
    )
    legacy = JsonRpcDispatcher(handler, context_builder=ContextBuilder(), enable_v0_3_compat=True)
    sdk_endpoint = explained(well_formed(first_event_first(legacy.handle_requests)))
    lean = JsonRpcEndpoint(handler, call_context, sdk_endpoint)
    debug = hub.settings.debug
    secured = hub.security
    rated = limit_rate(hub.rates, lean if hub.settings.jsonrpc == "lean" else sdk_endpoint)
    # key first (its answer to an unknown id lists only the agents the caller may reach), then the id
    jsonrpc = trace_requests(require_key(secured, guard_agent(hub.registry, rated)), debug=debug)
    rpc = jsonrpc
    card = require_key(secured, guard_agent(hub.registry, _card(hub)), optional=True)
    routes: list[BaseRoute] = [
        Route("/healthz", _healthz, methods=["GET"]),
        Route(AGENTS_PATH, require_key(secured, _list_agents(hub), optional=True), methods=["GET"]),
        Route("/.well-known/jwks.json", _jwks(hub), methods=["GET"]),
        Route(f"{AGENTS_PATH}/{{agent_id}}/.well-known/agent-card.json", card, methods=["GET"]),
        Route(f"{AGENTS_PATH}/{{agent_id}}/.well-known/agent.json", card, methods=["GET"]),
        Route(f"{AGENTS_PATH}/{{agent_id}}", rpc, methods=["POST"]),
        Route(f"{AGENTS_PATH}/{{agent_id}}/", rpc, methods=["POST"]),
    ]
    rest = create_rest_routes(
        handler,
        context_builder=ContextBuilder(),
        path_prefix=f"{AGENTS_PATH}/{{agent_id}}",
        enable_v0_3_compat=True,
    )
    routes.extend(_rest_routes(hub, rest))
    if root is not None:
        routes.extend(
            _root_routes(
                hub,
                root,
                rpc,
                card,
                create_rest_routes(handler, context_builder=ContextBuilder(), enable_v0_3_compat=True),
            )
        )
    routes.extend(api_routes(hub.rates, debug=hub.settings.debug))
    routes.extend(mcp_routes(hub))
    routes.extend(web_routes())  # the browser page; last, so it never shadows /a2a or /api
    # the fast path serves what needs no Request: no keys to check, no bodies to log
    slow_only = secured.enabled or debug or hub.settings.jsonrpc != "lean"
    app = FastPathApp(
        lean=None if slow_only else lean_edge(lean, hub.rates, scope_context),
        agents=hub.registry,
        max_body=hub.settings.max_body_bytes,
        routes=routes,
        lifespan=hub.lifespan,
        exception_handlers={HTTPException: _http_error},
        middleware=[
            Middleware(BodyLimit, max_bytes=hub.settings.max_body_bytes),
            Middleware(ActivatedExtensions),
        ],
    )
    app.state.hub = hub
    return app


def _rest_routes(hub: Hub, rest: list[BaseRoute]) -> list[BaseRoute]:
    """The SDK's HTTP+JSON routes behind ranch's wrappers: key, agent id, rate limit, trace."""
    routes: list[BaseRoute] = []
    for route in rest:
        if isinstance(route, Route):  # the SDK also mounts /{tenant}/...; ranch has no tenants in URLs
            endpoint = well_formed(first_event_first(route.endpoint))
            if route.path.endswith("/tasks") and route.methods and "GET" in route.methods:
                endpoint = check_list_query(endpoint)
            endpoint = guard_agent(hub.registry, limit_rate(hub.rates, endpoint))
            endpoint = trace_requests(require_key(hub.security, endpoint), debug=hub.settings.debug)
            routes.append(Route(route.path, endpoint, methods=route.methods))
    return routes


def _root_routes(
    hub: Hub, root: str, rpc: Endpoint, card: Endpoint, rest: list[BaseRoute]
) -> list[BaseRoute]:
    """`--root`: one agent's card and bindings at the root too, for single-agent deployments."""
    routes: list[BaseRoute] = [
        Route("/.well-known/agent-card.json", rooted(root, card), methods=["GET"]),
        Route("/.well-known/agent.json", rooted(root, card), methods=["GET"]),
        Route("/", rooted(root, rpc), methods=["POST"]),
    ]
    for route in _rest_routes(hub, rest):
        assert isinstance(route, Route)
        routes.append(Route(route.path, rooted(root, route.endpoint), methods=route.methods))
    return routes


async def _http_error(request: Request, exc: Exception) -> Response:
    """No route, or a method the route does not take: JSON in the A2A error shape, not plain text."""
    assert isinstance(exc, HTTPException)
    message = f"{request.method} {request.url.path}: {exc.detail}"
    body = http_error_body(exc.status_code, message, request.url.path)
    return JSONResponse(body, exc.status_code, headers=exc.headers)


async def _healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok", "version": __version__})


def _base_url(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def _list_agents(hub: Hub):  # type: ignore[no-untyped-def]
    async def list_agents(request: Request) -> Response:
        base = _base_url(request)
        agents = [
            agent
            for agent in hub.registry
            if not hub.security.enabled
            or await hub.security.reachable(request.scope.get(PRINCIPAL_KEY), agent.id)
        ]
        infos = await gather_infos(agents)  # at once: a slow card costs one card timeout, not one each
        entries = []
        for agent, info in zip(agents, infos, strict=True):
            entries.append(
                {
                    "id": agent.id,
                    "name": info.name,
                    "description": info.description,
                    "kind": "team"
                    if isinstance(agent, Team)
                    else type(agent).__name__.removesuffix("Agent").lower(),
                    "url": agent_url(base, agent.id),
                    "card": f"{agent_url(base, agent.id)}/.well-known/agent-card.json",
                }
            )
        return JSONResponse({"agents": entries})

    return list_agents


def _card(hub: Hub):  # type: ignore[no-untyped-def]
    async def card(request: Request) -> Response:
        agent = hub.registry.get(request.path_params["agent_id"])
        at_root = request.url.path.startswith("/.well-known/")  # `--root`: the bindings are at / too
        served = await served_card(agent, _base_url(request), _base_url(request) if at_root else None)
        if hub.security.enabled:
            declare_security(served)
        signer = hub.signer
        if signer is None:
            return JSONResponse(agent_card_to_dict(served))
        signer.sign(served)  # what 1.0 clients verify; then what 0.3 clients read of the same card
        return JSONResponse(signer.sign_v03(agent_card_to_dict(served)))

    return card


def _jwks(hub: Hub):  # type: ignore[no-untyped-def]
    """The public key of `signing_key`, for peers that verify ranch's cards (404 when cards are unsigned)."""

    async def jwks(request: Request) -> Response:
        signer = hub.signer
        if signer is None:
            raise HTTPException(404, "agent cards are not signed on this server (no signing_key)")
        return JSONResponse(signer.jwks())

    return jwks
