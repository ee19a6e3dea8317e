"""`create_app(config)`: the Starlette app serving every agent and team of a config.

The lifespan opens, in order: the shared outbound client pool, the agents (their
MCP connections), the task store (SQLite by default), the task group that owns
every run, and the hub's services (the /mcp session manager); it closes them in
reverse. The layout is docs/surface (README): cards, JSON-RPC and HTTP+JSON per
agent under /a2a/agents/{id}, and every agent and team as MCP tools at /mcp.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

import anyio
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_rest_routes
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import AgentCard
from anyio.abc import TaskGroup
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import Scope

from ranch._version import __version__
from ranch.agents.base import Agent, AgentInfo, gather_infos
from ranch.api import errors as api_errors
from ranch.api.routes import direct_routes
from ranch.api.routes import routes as api_routes
from ranch.api.routes import websockets as api_websockets
from ranch.api.services import ApiServices
from ranch.catalog.ai_catalog import ai_catalog, catalog_entry
from ranch.catalog.caching import cached_json
from ranch.catalog.cards import (
    API_CARDS_PATH,
    CATALOG_PATH,
    HUB_CARD_PATHS,
    TENANTS_PATH,
    WELL_KNOWN_AGENTS_PATH,
    hub_card,
    served_card,
)
from ranch.catalog.changes import Changes
from ranch.catalog.discovery import Wanted
from ranch.catalog.extended import extended_card
from ranch.catalog.records import resync
from ranch.catalog.registry import Registry
from ranch.config import RanchConfig, RetentionConfig
from ranch.db import migrate
from ranch.db.conversations import ConversationStore
from ranch.db.engine import SQLITE_BUSY_TIMEOUT_S, dispose, open_engine
from ranch.db.group_commit import CommitGroup
from ranch.db.replicas import DEFAULT_LEASE, Replicas
from ranch.edge.app import EdgeApp
from ranch.edge.context import ContextBuilder, call_context, request_context
from ranch.edge.grpc import MISSING as GRPC_MISSING
from ranch.edge.grpc import available as grpc_available
from ranch.edge.grpc.port import GrpcPort
from ranch.edge.guards import AGENT_KEY, Guards
from ranch.edge.sdk import check_list_query, first_event_first, well_formed, with_clearer_sdk_errors
from ranch.exceptions import ConfigError, Forbidden, RanchError
from ranch.fanout import Fanout, open_fanout
from ranch.hub.mcp_route import MCP_PATH, LazyMcp
from ranch.hub.resuming import TurnResumer
from ranch.hub.serving import ExtendedCard, RanchRequestHandler
from ranch.identity.principal import PRINCIPAL_KEY
from ranch.identity.resolver import AuthFailures
from ranch.identity.security import build_security
from ranch.identity.sessions import DEFAULT_SESSION_TTL
from ranch.observe import metrics, tracing
from ranch.policy.egress import GuardedTransport
from ranch.policy.limits import DEFAULT_MAX_MESSAGE_BYTES, Limits
from ranch.policy.logs import AccessLog
from ranch.policy.ratelimit import Rate, build_policy
from ranch.policy.ssrf import UrlGuard
from ranch.retention.rounds import Rounds
from ranch.rooms.delivery import recover as recover_deliveries
from ranch.rooms.gateway import Gateway
from ranch.rooms.runtime import RoomsRuntime
from ranch.rooms.runtime import start as start_rooms
from ranch.routing.team import Team
from ranch.tasks.engine import TaskEngine
from ranch.tasks.push import PushConfigStore, PushNotifier, PushOutbox, PushSender, webhook_client
from ranch.tasks.store import SqlTaskStore, owner_of
from ranch.web import web_routes
from ranch.wire.cards import AGENTS_PATH, agent_url, declare_security
from ranch.wire.client import ClientPool, TransportFactory
from ranch.wire.errors import http_error_body
from ranch.wire.fastpath import FastHandler
from ranch.wire.jsonrpc import JsonRpcEndpoint, Use03Dispatcher
from ranch.wire.middleware import ActivatedExtensions
from ranch.wire.routing_schema_route import SCHEMA_PATH
from ranch.wire.routing_schema_route import endpoint as routing_schema
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
    """Share task events, sessions, rate-limit buckets and catalog changes with the other replicas
    through this Redis instead of keeping them in this process."""
    redis_prefix: str = "ranch"
    """Keys and channels this hub uses in Redis start with it (hubs sharing one Redis pick their own)."""
    cluster_secret: str | None = None
    """The secret every replica shares: what they write to Redis is signed with it, and what is not
    is dropped (docs/deploy.md). None = unsigned, with a warning at start when `redis_url` is set."""
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
    access_log: AccessLog | None = None
    """Write one line per request here (`ranch serve` does, unless `--no-access-log`); None = none."""
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
    grpc_port: int | None = None
    """Serve A2A over gRPC on this port too (0: a free one), every agent by its `tenant`; None: no gRPC."""
    grpc_host: str = "127.0.0.1"
    grpc_tls: tuple[str, str] | None = None
    """The certificate and key files gRPC serves TLS with (`--ssl-certfile/--ssl-keyfile`)."""
    sqlite_busy_timeout: float = SQLITE_BUSY_TIMEOUT_S
    """Seconds a SQLite write waits for another connection's lock before it fails (and is retried)."""
    lease: float = DEFAULT_LEASE
    """Seconds a replica may stay silent before another takes its work over (docs/deploy.md)."""
    retention: RetentionConfig | None = None
    """How long finished things are kept (docs/deploy.md, "Retention"); None: the config's `retention:`."""
    exit_on_failure: bool = False
    """When the hub's background work fails while serving, stop the process (SIGTERM to itself:
    uvicorn stops serving, and `ranch serve` exits 1) so a supervisor restarts it. Off when
    embedded: the hub then only stops serving (`/healthz` answers 503)."""
    freeze_heap: bool = False
    """Once started, move every object start-up made out of the garbage collector's reach
    (`gc.freeze()`): its full collections then scan what requests made, not the modules, schemas
    and config. Measured on a started hub: a full collection scanned about 167,000 objects and held
    the event loop 75-91 ms (under room posts, one every few thousand requests), under 1 ms frozen;
    GC cost 18-22 µs a request on average, 8 frozen. `ranch serve` owns its process and sets it; a
    process running many apps (tests, an embedding) does not."""
    # -- observability (docs/observability.md) --
    metrics: bool = False
    """Serve Prometheus metrics at GET /metrics (behind the superuser's key with `auth="keys"`)."""
    trace_url: str | None = None
    """A trace viewer's URL with `{trace_id}`: the web page links team turns to their traces."""
    replay_configs: tuple[tuple[str, str], ...] = ()
    """(name, path) of the config files admins may replay stored turns on (docs/replay.md, the page)."""
    clock: Callable[[], float] = time.monotonic
    """The seconds that session TTLs, the key, visibility and remote-card caches and in-process rate
    limits count (Redis buckets count Redis's); embedding code and tests may pass a clock of their own."""

    def limits(self) -> Limits:
        return Limits(max_message_bytes=self.max_message_bytes)

    def url_guard(self) -> UrlGuard:
        if self.guard is not None:
            return self.guard
        return UrlGuard(allow_loopback=self.allow_private_outbound or self.allow_loopback_webhooks)

    def client_pool(
        self, transport: TransportFactory | None = None, guard: UrlGuard | None = None
    ) -> ClientPool:
        """An outbound pool with these card and reply limits; `transport` and `guard` judge connections
        (tenants': `guard` those of gRPC members)."""
        return ClientPool(
            transport=transport,
            guard=guard,
            card_timeout=self.card_timeout,
            max_card_bytes=self.max_card_bytes,
            max_reply_bytes=self.max_reply_bytes or self.max_message_bytes,
            clock=self.clock,
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
        self.seen_base_url = "http://127.0.0.1"
        """Where this hub's cards were last fetched: the URLs of an extended card asked over gRPC."""
        self.guard = settings.url_guard()
        self.pool = settings.client_pool()
        self.tenant_pool = settings.client_pool(lambda: GuardedTransport(self.guard), self.guard)
        self.registry = Registry(config, self.pool, self.tenant_pool)
        self.config = config
        self.services: list[Callable[[], AbstractAsyncContextManager[None]]] = []
        """More things the lifespan runs, entered after the task core (the /mcp session manager)."""
        self.rates = build_policy(
            *settings.rates(),
            redis_url=settings.redis_url,
            prefix=f"{settings.redis_prefix}:ratelimit:",
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
            redis_url=settings.redis_url,
            redis_prefix=settings.redis_prefix,
        )
        self.changes = Changes(self.security)
        """Keys revoked and agents added or removed here, told to the other replicas, and theirs here."""
        self.signer = CardSigner.from_file(settings.signing_key) if settings.signing_key else None
        """Signs every served card; an unreadable key fails here, at start-up, naming the file."""
        self._core: TaskEngine | None = None
        self._resumer: TurnResumer | None = None
        self._rooms: RoomsRuntime | None = None
        self._gateway: Gateway | None = None
        self._fanout: Fanout | None = None
        self.failure: BaseException | None = None
        """What stopped the hub's background work while it served (then it serves no more)."""

    @property
    def core(self) -> TaskEngine:
        if self._core is None:
            raise RuntimeError("the ranch app was not started (its lifespan did not run)")
        return self._core

    @property
    def group(self) -> TaskGroup:
        """The task group of the hub's background work, for as long as it serves."""
        return self.rooms.group

    @property
    def gateway(self) -> Gateway | None:
        return self._gateway

    @property
    def rooms(self) -> RoomsRuntime:
        if self._rooms is None:
            raise RuntimeError("the ranch app was not started (its lifespan did not run)")
        return self._rooms

    def unavailable(self) -> str | None:
        """Why the hub cannot serve now (for /healthz), or None when it can."""
        if self.failure is not None:
            return f"the hub's background work failed: {_kinds(self.failure)}; it is stopping"
        if self._core is None:
            return "the hub is not running (starting or stopped)"
        return None

    def fanout_state(self) -> str:
        """`local` (one process), `connected`, or `reconnecting` (Redis's pub/sub connection is down)."""
        if self._fanout is None or not self._fanout.shared:
            return "local"
        return "connected" if self._fanout.connected else "reconnecting"

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        """Run the hub; when its background work fails while serving, say so (`failed`) and fail."""
        serving = stopping = False
        try:
            async with self._running() as running:
                serving = True
                yield running
                stopping = True
        except Exception as exc:
            if serving and not stopping:
                self._failed(exc)
            raise

    def _failed(self, exc: Exception) -> None:
        """The task group's work failed while serving: every request would fail from now on."""
        self.failure = exc
        logger.critical("the hub's background work failed; it stops serving", exc_info=exc)
        if self.settings.exit_on_failure:
            logger.critical("stopping the process: a supervisor restarts it")
            os.kill(os.getpid(), signal.SIGTERM)

    @asynccontextmanager
    async def _running(self) -> AsyncIterator[None]:
        if self.settings.redis_url and not self.settings.cluster_secret:
            logger.warning(
                "no --cluster-secret: replicas act on anything written to Redis, unsigned; "
                "set the same secret on every replica (docs/deploy.md)"
            )
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(tracing.exporting())  # the last spans go out as it stops
            if self.settings.access_log is not None:  # its writer task lives as long as the hub
                await stack.enter_async_context(self.settings.access_log)
            stack.push_async_callback(self.pool.aclose)
            stack.push_async_callback(self.tenant_pool.aclose)
            stack.push_async_callback(self.registry.aclose)
            stack.push_async_callback(self.rates.aclose)
            if self.security.sessions is not None:
                stack.push_async_callback(self.security.sessions.aclose)
            await self.registry.open()
            engine = open_engine(self.settings.database_url, busy_timeout=self.settings.sqlite_busy_timeout)
            stack.push_async_callback(dispose, engine)  # bounded: a stuck close never holds the exit
            # a turn's conversation commits with its task; left (rows committed) before the engine goes
            commits = await stack.enter_async_context(CommitGroup(engine))
            store = SqlTaskStore(engine, owner_resolver=owner_of, commits=commits)
            await migrate.upgrade(engine)
            replicas = await stack.enter_async_context(Replicas(engine, lease=self.settings.lease))
            shared = open_fanout(
                self.settings.redis_url,
                prefix=self.settings.redis_prefix,
                secret=self.settings.cluster_secret,
            )
            fanout = self._fanout = await stack.enter_async_context(shared)
            conversations = ConversationStore(engine, shared=fanout.shared, commits=commits)
            await conversations.open()
            self.registry.keep_state(conversations)
            push_store = PushConfigStore(engine, owner_resolver=owner_of, fanout=fanout)
            await push_store.initialize()
            webhooks = await stack.enter_async_context(webhook_client(self.guard))
            group = await stack.enter_async_context(anyio.create_task_group())
            push = PushNotifier(push_store, PushSender(webhooks), group, PushOutbox(engine, replicas.id))
            self._core = TaskEngine(store, group, push, runner=replicas.id, fanout=fanout)
            self._resumer = TurnResumer(self._core, self.registry, conversations)
            alive = await replicas.alive()
            await push.take_over(alive)  # before the failures below add their own updates
            failed = await self._core.take_over(alive, self._resumer)
            self._rooms = await start_rooms(
                engine,
                self.config,
                self.registry,
                self._core,
                group,
                failed_tasks=failed,
                alive=alive,
                admin_key=self.settings.admin_key,
                demo=self.settings.demo,
                announce=self.settings.announce,
                limits=self.settings.limits(),
                fanout=fanout,
            )
            await self._resumer.rooms_started(self._rooms.dispatcher)  # room turns taken over above
            await group.start(self._rooms.bus.relay, self.changes.recheck_live)
            self._gateway = Gateway(self._rooms)
            known = self._rooms.rooms.known
            await group.start(self.changes.follow, fanout, self._resync, known.__setitem__)
            await group.start(self._core.hear_stops)
            group.start_soon(self._take_over, replicas)
            retention = self.settings.retention or self.config.retention
            rounds = Rounds(engine, retention, replicas.id, forget_tasks=self._forget_tasks)
            if rounds.active:  # one replica at a time prunes, a round per period
                group.start_soon(rounds.loop)
            for service in self.services:
                await stack.enter_async_context(service())
            if self.settings.freeze_heap:
                gc.collect()
                gc.freeze()
            try:
                yield
            finally:
                group.cancel_scope.cancel()
                self._core = None
                self._rooms = None
                self._gateway = None
                self._fanout = None

    def _forget_tasks(self, task_ids: Sequence[str]) -> None:
        """Pruned tasks leave this replica's cache of recent ones too: they answer TaskNotFound."""
        if self._core is not None:
            for task_id in task_ids:
                self._core.recent.pop(task_id)

    async def _resync(self) -> None:
        """Serve what the agents table holds now, and know every room (other replicas changed them)."""
        rooms = self.rooms
        async with rooms.sessions() as session:
            await resync(session, rooms.registry, rooms.group)
        await rooms.rooms.load_known()

    async def _take_over(self, replicas: Replicas) -> None:
        """Every half lease: the push updates replicas that stopped were sending are sent, the team
        turns they left running resume here from their checkpoints and their other tasks fail, their
        rooms told, and the room messages they had queued are handled here."""
        while True:
            await anyio.sleep(replicas.lease / 2)
            try:
                alive = await replicas.alive()
                if self.core.push is not None:
                    await self.core.push.take_over(alive)
                failed = await self.core.take_over(alive, self._resumer)
                queued = await recover_deliveries(self.rooms.dispatcher, failed, alive)
                if queued:
                    logger.info("took over %d room message(s) of stopped replicas", queued)
            except Exception:  # a busy database: the next round tries again
                logger.warning("could not take over stopped replicas' work", exc_info=True)


def create_app(config: RanchConfig, settings: Settings | None = None) -> Starlette:
    """Every agent and team of `config` as an A2A server (JSON-RPC and HTTP+JSON)."""
    hub = Hub(config, settings or Settings())
    tracing.from_environment()  # OTEL_* variables: off unless they configure an exporter
    tracing.set_trace_url(hub.settings.trace_url)
    if hub.settings.metrics:
        metrics.enable()
    root = hub.settings.root
    if root is not None and root not in hub.registry:
        known = ", ".join(hub.registry.ids()) or "none"
        raise ConfigError([f"--root {root}: no agent or team '{root}' in the config (known: {known})"])
    grpc_port = _grpc_port(hub.settings)
    handler = RanchRequestHandler(
        hub.registry,
        lambda: hub.core,
        hub.settings.limits(),
        hub.guard,
        lambda: hub.gateway,
        sessions=hub.security.sessions,
        extended_card=_extended_card(hub, grpc_port) if hub.security.enabled else None,
    )
    # every guard ran before any of these endpoints (`EdgeApp`): they only serve
    dispatcher = JsonRpcDispatcher(handler, context_builder=ContextBuilder(), enable_v0_3_compat=True)
    sdk_jsonrpc = with_clearer_sdk_errors(well_formed(first_event_first(dispatcher.handle_requests)))
    endpoint = JsonRpcEndpoint(handler, request_context, sdk_jsonrpc)
    lean = hub.settings.jsonrpc == "lean"
    jsonrpc = endpoint.__call__ if lean else sdk_jsonrpc  # a method: Starlette passes it a Request
    card = _card(hub, grpc_port)
    api = _api_services(hub)
    routes: list[BaseRoute] = [
        Route(
            f"{API_CARDS_PATH}/{{agent_id}}/.well-known/agent-card.json", card, methods=["GET"]
        ),  # seed 003 B
        *api_routes(api),  # early: the REST calls are the most frequent the router matches
        Route("/healthz", _healthz(hub), methods=["GET"]),
        Route(AGENTS_PATH, _list_agents(hub), methods=["GET"]),
        Route(CATALOG_PATH, _ai_catalog(hub), methods=["GET"]),
        Route("/.well-known/jwks.json", _jwks(hub), methods=["GET"]),
        Route(SCHEMA_PATH, routing_schema, methods=["GET"]),  # the client-routing extension's schemas
        Route(f"{AGENTS_PATH}/{{agent_id}}/.well-known/agent-card.json", card, methods=["GET"]),
        Route(f"{AGENTS_PATH}/{{agent_id}}/.well-known/agent.json", card, methods=["GET"]),
        Route(f"{WELL_KNOWN_AGENTS_PATH}/{{agent_id}}.json", card, methods=["GET"]),  # seed 003 C
        Route(f"{AGENTS_PATH}/{{agent_id}}", jsonrpc, methods=["POST"]),
        Route(f"{AGENTS_PATH}/{{agent_id}}/", jsonrpc, methods=["POST"]),
        *_rest_routes(handler, f"{AGENTS_PATH}/{{agent_id}}"),
        Route(TENANTS_PATH, jsonrpc, methods=["POST"]),  # one endpoint: the tenant names the agent
        *_rest_routes(handler, f"{TENANTS_PATH}/{{tenant}}"),
    ]
    root_rest = _rest_routes(handler, "") if root is not None else []
    if root is not None:  # one agent's card and bindings at the root too, for single-agent deployments
        routes += [
            Route("/.well-known/agent-card.json", card, methods=["GET"]),
            Route("/.well-known/agent.json", card, methods=["GET"]),
            Route("/", jsonrpc, methods=["POST"]),
            *root_rest,
        ]
    else:  # the hub's own card: where its agents are found
        routes += [Route(path, _hub_card(hub), methods=["GET"]) for path in HUB_CARD_PATHS]
    if hub.settings.metrics:
        routes.append(Route("/metrics", _metrics(hub), methods=["GET"]))
    routes.append(Route(MCP_PATH, endpoint=LazyMcp(hub)))  # the MCP SDK loads on the first call
    routes.extend(web_routes())  # the browser page; last, so it never shadows /a2a or /api
    guards = Guards(
        security=hub.security,
        rates=hub.rates,
        max_body=hub.settings.max_body_bytes,
        root=root,
        root_routes=root_rest,
    )
    if grpc_port is not None:
        from ranch.edge.grpc.server import serve_grpc  # grpcio is optional (`_grpc_port` checked it)

        logs, debug = hub.settings.access_log, hub.settings.debug
        hub.services.append(serve_grpc(grpc_port, handler, guards, access_log=logs, debug=debug))
    app = EdgeApp(
        guards=guards,
        fast=_fast(endpoint) if lean else None,
        websockets=api_websockets(api),
        direct=direct_routes(api),
        access_log=hub.settings.access_log,
        debug=hub.settings.debug,
        routes=routes,
        lifespan=hub.lifespan,
        exception_handlers={HTTPException: _http_error},
        middleware=[Middleware(ActivatedExtensions)],
    )
    app.state.hub = hub
    app.state.grpc = grpc_port
    return app


def _grpc_port(settings: Settings) -> GrpcPort | None:
    """Where gRPC is served, when it is; a one-line ConfigError when grpcio is missing."""
    if settings.grpc_port is None:
        return None
    if not grpc_available():
        raise ConfigError([GRPC_MISSING])
    return GrpcPort(settings.grpc_host, settings.grpc_port, settings.grpc_tls)


def _api_services(hub: Hub) -> ApiServices:
    """What the REST API and the WebSocket use of the hub."""
    return ApiServices(
        runtime=lambda: hub.rooms,
        security=hub.security,
        changes=hub.changes,
        rates=hub.rates,
        guard=hub.guard,
        max_frame_bytes=hub.settings.max_message_bytes,
        debug=hub.settings.debug,
        replay_configs=dict(hub.settings.replay_configs),
    )


def _fast(endpoint: JsonRpcEndpoint) -> FastHandler:
    """The fast path's handler: ranch's JSON-RPC binding, with the call context read off the scope."""

    async def answer(agent_id: str, scope: Scope, body: bytes) -> bytes | Response | None:
        answered = await endpoint.answer(body, lambda: call_context(scope))
        return None if isinstance(answered, Use03Dispatcher) else answered

    return answer


def _rest_routes(handler: RanchRequestHandler, prefix: str) -> list[BaseRoute]:
    """The SDK's HTTP+JSON routes under `prefix`, answering bad input as ranch's bindings do."""
    routes: list[BaseRoute] = []
    rest = create_rest_routes(
        handler, context_builder=ContextBuilder(), path_prefix=prefix, enable_v0_3_compat=True
    )
    for route in rest:
        if isinstance(route, Route):  # the SDK also mounts /{tenant}/...; ranch has no tenants in URLs
            endpoint = well_formed(first_event_first(route.endpoint))
            if route.path.endswith("/tasks") and route.methods and "GET" in route.methods:
                endpoint = check_list_query(endpoint)
            routes.append(Route(route.path, endpoint, methods=route.methods))
    return routes


async def _http_error(request: Request, exc: Exception) -> Response:
    """No route, or a method the route does not take: JSON in the A2A error shape, not plain text."""
    assert isinstance(exc, HTTPException)
    message = f"{request.method} {request.url.path}: {exc.detail}"
    body = http_error_body(exc.status_code, message, request.url.path)
    return JSONResponse(body, exc.status_code, headers=exc.headers)


def _metrics(hub: Hub):  # type: ignore[no-untyped-def]
    async def serve_metrics(request: Request) -> Response:
        """Prometheus text; with `--auth keys` only for the server's superuser (the operator)."""
        if hub.security.enabled:
            try:
                principal = await hub.security.keys.fresh(request)
                if not principal.is_superuser:  # its labels name every organization's agents and teams
                    raise Forbidden("only the server's superuser may read /metrics")
            except RanchError as exc:
                return api_errors.response(exc)
        return Response(metrics.render(), media_type=metrics.CONTENT_TYPE)

    return serve_metrics


def _kinds(exc: BaseException) -> str:
    """The kinds of error in `exc` (a task group's are in its group), without their messages."""
    if isinstance(exc, BaseExceptionGroup):
        return ", ".join(_kinds(inner) for inner in exc.exceptions)
    return type(exc).__name__


def _healthz(hub: Hub):  # type: ignore[no-untyped-def]
    async def healthz(request: Request) -> Response:
        """200 while the hub serves; 503 with the reason when it cannot (a load balancer's check).
        Redis reconnecting is told, not failed: every replica shares it (docs/deploy.md)."""
        reason = hub.unavailable()
        if reason is not None:
            return JSONResponse({"status": "unavailable", "reason": reason, "version": __version__}, 503)
        return JSONResponse({"status": "ok", "version": __version__, "fanout": hub.fanout_state()})

    return healthz


def _base_url(request: Request) -> str:
    return str(request.base_url).rstrip("/")


async def _visible(hub: Hub, request: Request, wanted: Wanted) -> tuple[list[Agent], list[AgentInfo]]:
    """The agents the caller may reach that match `wanted`, with their infos."""
    agents = [
        agent
        for agent in hub.registry
        if not hub.security.enabled
        or await hub.security.reachable(request.scope.get(PRINCIPAL_KEY), agent.id)
    ]
    infos = await gather_infos(agents)  # at once: a slow card costs one card timeout, not one each
    if wanted.given:
        kept = [(agent, info) for agent, info in zip(agents, infos, strict=True) if wanted.matches(info)]
        agents, infos = [agent for agent, _ in kept], [info for _, info in kept]
    return agents, infos


def _kind(agent: Agent) -> str:
    return "team" if isinstance(agent, Team) else type(agent).__name__.removesuffix("Agent").lower()


def _list_agents(hub: Hub):  # type: ignore[no-untyped-def]
    async def list_agents(request: Request) -> Response:
        """The agents the caller may reach, narrowed by `?skill=&tag=&mode=` (catalog/discovery.py)."""
        try:
            wanted = Wanted.from_query(request.query_params)
        except RanchError as exc:
            return api_errors.response(exc)
        base = _base_url(request)
        agents, infos = await _visible(hub, request, wanted)
        entries = []
        for agent, info in zip(agents, infos, strict=True):
            entries.append(
                {
                    "id": agent.id,
                    "name": info.name,
                    "description": info.description,
                    "kind": _kind(agent),
                    "url": agent_url(base, agent.id),
                    "card": f"{agent_url(base, agent.id)}/.well-known/agent-card.json",
                }
            )
        return JSONResponse({"agents": entries})

    return list_agents


def _ai_catalog(hub: Hub):  # type: ignore[no-untyped-def]
    async def catalog(request: Request) -> Response:
        """The AI catalog (catalog/ai_catalog.py): what /a2a/agents lists, in the draft's format;
        `?cards=inline` carries each card as `data` instead of its `url`."""
        try:
            wanted = Wanted.from_query(request.query_params)
        except RanchError as exc:
            return api_errors.response(exc)
        inline = request.query_params.get("cards") == "inline"
        base, host = _base_url(request), request.url.netloc
        agents, infos = await _visible(hub, request, wanted)
        entries = []
        for agent, info in zip(agents, infos, strict=True):
            card = None
            if inline:
                served = await served_card(agent, base)
                if hub.security.enabled:
                    declare_security(served)
                card = agent_card_to_dict(served)
            entries.append(catalog_entry(base, host, info, _kind(agent), card))
        return cached_json(request, ai_catalog(base, host, entries), private=hub.security.enabled)

    return catalog


def _card(hub: Hub, grpc_port: GrpcPort | None = None):  # type: ignore[no-untyped-def]
    async def card(request: Request) -> Response:
        agent = hub.registry.get(request.scope[AGENT_KEY])
        at_root = request.url.path in HUB_CARD_PATHS  # `--root`: the bindings are at / too
        grpc = grpc_port.target(request.url.hostname or grpc_port.host) if grpc_port else None
        root = _base_url(request) if at_root else None
        served = await served_card(agent, _base_url(request), root, grpc=grpc, tenants=not at_root)
        if hub.security.enabled:
            declare_security(served)
            served.capabilities.extended_agent_card = True  # GetExtendedAgentCard: the card per caller
        hub.seen_base_url = _base_url(request)
        signer = hub.signer
        private = hub.security.enabled  # who may see it depends on the key: shared caches must not keep it
        unsigned = agent_card_to_dict(served)
        if signer is None:
            return cached_json(request, unsigned, private=private)
        signer.sign(served)  # what 1.0 clients verify; then what 0.3 clients read of the same card
        signed = signer.sign_v03(agent_card_to_dict(served))
        return cached_json(request, signed, private=private, version=[unsigned, signer.kid])

    return card


def _extended_card(hub: Hub, grpc_port: GrpcPort | None) -> ExtendedCard:
    async def extended(agent: Agent, context: ServerCallContext) -> AgentCard:
        """The card as this caller may use it (catalog/extended.py); its URLs are those the request
        came to (its Host), or, over gRPC, those the hub's cards were last fetched at."""
        host = context.state.get("headers", {}).get("host")
        base = f"http://{host}" if host else hub.seen_base_url
        grpc = grpc_port.target(urlsplit(base).hostname or grpc_port.host) if grpc_port else None
        principal = context.state.get(PRINCIPAL_KEY)
        return await extended_card(agent, base, principal, hub.settings.rates(), grpc=grpc)

    return extended


def _hub_card(hub: Hub):  # type: ignore[no-untyped-def]
    async def card(request: Request) -> Response:
        """The hub's own card (no `--root`): a pointer to its catalog and its agents' cards."""
        served = hub_card(_base_url(request))
        return cached_json(request, agent_card_to_dict(served), private=False)

    return card


def _jwks(hub: Hub):  # type: ignore[no-untyped-def]
    """The public key of `signing_key`, for peers that verify ranch's cards (404 when cards are unsigned)."""

    async def jwks(request: Request) -> Response:
        signer = hub.signer
        if signer is None:
            raise HTTPException(404, "agent cards are not signed on this server (no signing_key)")
        return JSONResponse(signer.jwks())

    return jwks
