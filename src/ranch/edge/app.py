"""`EdgeApp`: the guard chain once per request, then its road, then one access-log line.

Every HTTP request is read once (`Guards.read`), runs under its trace id, and passes the
chain (`Guards.check`); a refusal is answered here in the binding's format. Then the road:
a plain A2A 1.0 JSON-RPC call goes to the `FastHandler` (no middleware stack, router,
`Request` or `Response`; keyed calls included, since the chain has authenticated them), a REST
operation matched by `direct` to its endpoint (no middleware stack or router), anything else, or
anything the fast handler hands back, to the full Starlette stack, which serves ranch's own
bindings, the a2a-sdk's dispatchers, the rest of the REST API, /mcp and the page.
Every response carries `X-Trace-Id`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any, Protocol

from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.types import Message, Receive, Scope, Send
from starlette.websockets import WebSocket

from ranch.db.engine import unavailable
from ranch.edge.debug import DebugTap
from ranch.edge.ending import KeyedStream, may_stream
from ranch.edge.guards import (
    BODY_METHODS,
    TRACE_KEY,
    Call,
    Entry,
    Guards,
    refusal,
    request_id_of,
    tenant_of,
)
from ranch.edge.sdk import Endpoint
from ranch.exceptions import RanchError, RateLimited
from ranch.identity.principal import PRINCIPAL_KEY
from ranch.observe import metrics, tracing
from ranch.policy.logs import TRACE_ID, AccessLog, trace_id_from
from ranch.wire.fastpath import FastHandler, read_body, replay, send_json


class Direct(Protocol):
    """REST operations matched without the router (api/direct.py)."""

    prefix: str
    """Where they are mounted: the root path their endpoints see."""

    def __call__(self, method: str, path: str) -> tuple[Endpoint, dict[str, str]] | None:
        """The endpoint of the operation that takes `method` on `path`, and its path parameters;
        None: the router decides."""


TRACE_HEADER = b"x-trace-id"
CLIENT_GONE = 499
"""The status an access line gives a request whose client left before it was answered."""


class EdgeApp(Starlette):
    """A Starlette app whose every HTTP request passes the guard chain once, then takes its road."""

    def __init__(
        self,
        *,
        guards: Guards,
        fast: FastHandler | None,
        websockets: Mapping[str, Callable[[WebSocket], Awaitable[None]]] | None = None,
        direct: Direct | None = None,
        access_log: AccessLog | None = None,
        debug: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.guards = guards
        self.fast = fast
        self.websockets = dict(websockets or {})
        """WebSocket endpoints by path, served straight from ASGI: a connection lives for hours, and
        the full stack (middleware, router, mount) would keep its frames alive that long, for each
        watcher. Each endpoint checks its own key, as WebSockets take no guard chain."""
        """Answers plain A2A 1.0 JSON-RPC calls; None sends every call down the full stack."""
        self.direct = direct
        """Matches REST operations, served without the router; None: the router serves them all."""
        self.access_log = access_log
        self.debug = debug
        self.fast_answers = 0
        """Requests the fast path answered (tests read it to tell which road a call took)."""
        self.direct_answers = 0
        """REST requests answered without the router (the same, for `direct`)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            endpoint = self.websockets.get(scope["path"]) if scope["type"] == "websocket" else None
            if endpoint is None:
                await super().__call__(scope, receive, send)  # lifespan, other WebSockets
                return
            scope["app"] = self
            await endpoint(WebSocket(scope, receive, send))
            return
        started = time.perf_counter()
        call = self.guards.read(scope)
        trace_id = trace_id_from(call.traceparent)
        if tracing.tracer() is None:
            span = None  # tracing off
        else:
            span = _server_span(call, scope)
            if span is not None:
                trace_id = tracing.trace_id_of(span)  # the caller's, unless its traceparent was not valid
        scope[TRACE_KEY] = trace_id
        token = TRACE_ID.set(trace_id)
        tap = DebugTap(call.method, call.path, receive, send) if self.debug else None
        if tap is not None:
            receive, send = tap.receive, tap.send
        status = 500
        try:
            if span is None:  # tracing off: not even a context manager on the request's path
                status = await self._serve(call, scope, receive, send, trace_id.encode())
            else:
                attached = tracing.enter(span)  # its children: the turn, the hops, outbound calls
                try:
                    status = await self._serve(call, scope, receive, send, trace_id.encode())
                finally:
                    tracing.detach(attached)
        finally:
            if tap is not None:
                tap.done()
            TRACE_ID.reset(token)
            if span is not None:
                _end_server_span(span, scope, status)
            if metrics.enabled():
                metrics.request(call.entry.value, _method(call.method), status)
            if self.access_log is not None:
                self.access_log(
                    call.method,
                    call.path,
                    scope["query_string"],
                    status,
                    time.perf_counter() - started,
                    trace_id,
                    call.client,
                )

    async def _serve(self, call: Call, scope: Scope, receive: Receive, send: Send, trace: bytes) -> int:
        """Guard, then answer on the request's road; returns the status sent."""
        try:
            if call.tenant_in_body:  # JSON-RPC at /a2a: the body names the agent the chain guards
                body = await read_body(receive, self.guards.max_body)
                if body is None:
                    return CLIENT_GONE
                receive = replay(body, receive)  # first: a refusal reads the request's id from it
                call.agent_id = tenant_of(body) or ""
            await self.guards.check(call, scope)
            if call.length is None and call.method in BODY_METHODS:  # no Content-Length: count it
                body = await read_body(receive, self.guards.max_body)
                if body is None:
                    return CLIENT_GONE
                receive = replay(body, receive)
        except RanchError as error:
            return await self._refuse(call, error, scope, receive, send, trace)
        except Exception as exc:  # a key lookup found the database unavailable: 503 in the binding's format
            failure = unavailable(exc, f"{call.method} {call.path}")
            if failure is None:
                raise
            return await self._refuse(call, failure, scope, receive, send, trace)
        if call.fast and self.fast is not None:
            body = await read_body(receive)
            if body is None:
                return CLIENT_GONE
            answer = await self.fast(call.agent_id, scope, body)
            if isinstance(answer, bytes):
                self.fast_answers += 1  # counted before sending: a client reading it has its answer
                await send_json(send, answer, [(TRACE_HEADER, trace)])
                return 200
            if answer is not None:
                self.fast_answers += 1
                if may_stream(call, self.guards.security):  # a stream ends when its key does
                    streamed = _Traced(send, trace)  # its status is the one sent: a refusal is a 401
                    ending = KeyedStream(call, self.guards.security, streamed, request_id_of(body))
                    await ending.run(partial(answer, scope, receive))
                    return streamed.status
                answer.raw_headers.append((TRACE_HEADER, trace))
                await answer(scope, receive, send)
                return answer.status_code
            receive = replay(body, receive)  # an A2A 0.3 method name: the SDK's dispatcher serves it
        sent = _Traced(send, trace)
        if call.entry is Entry.API and await self._direct(call, scope, receive, sent):
            return sent.status
        if may_stream(call, self.guards.security):  # a stream ends when its key does
            ending = KeyedStream(call, self.guards.security, sent)
            await ending.run(partial(super().__call__, scope, ending.reading(receive)))
        else:
            await super().__call__(scope, receive, sent)
        return sent.status

    async def _direct(self, call: Call, scope: Scope, receive: Receive, send: Send) -> bool:
        """Serve a REST operation `direct` matches with its endpoint, in the scope its mount would
        give it; False if none does. A failure the endpoint does not answer itself is a plain 500,
        raised on to the server (as the full stack's outermost middleware does)."""
        if self.direct is None or scope.get("root_path"):
            return False
        found = self.direct(call.method, call.path)
        if found is None:
            return False
        endpoint, params = found
        self.direct_answers += 1
        scope.update(
            app=self, path_params=params, app_root_path="", root_path=self.direct.prefix, endpoint=endpoint
        )
        try:
            response = await endpoint(Request(scope, receive, send))
        except Exception:
            await PlainTextResponse("Internal Server Error", status_code=500)(scope, receive, send)
            raise
        await response(scope, receive, send)
        return True

    async def _refuse(
        self, call: Call, error: Exception, scope: Scope, receive: Receive, send: Send, trace: bytes
    ) -> int:
        if metrics.enabled():
            if call.entry is Entry.API and not call.jsonrpc:  # the A2A formats count theirs (`to_a2a`)
                metrics.error(type(error).__name__)
            if isinstance(error, RateLimited):
                metrics.rate_limited(error.key.partition(":")[0])
        request_id = None
        if call.jsonrpc and call.method == "POST" and call.length is not None:
            if call.length <= self.guards.max_body:  # the id is in the body: read it, when it is small enough
                request_id = request_id_of(await read_body(receive) or b"")
        response = refusal(call, error, request_id)
        response.raw_headers.append((TRACE_HEADER, trace))
        await response(scope, receive, send)
        return response.status_code


_ROUTES = {
    Entry.A2A: "/a2a/agents/{agent}",
    Entry.CARD: "/a2a/agents/{agent}/.well-known/agent-card.json",
    Entry.AGENTS: "/a2a/agents",
    Entry.MCP: "/mcp",
    Entry.API: "/api/v1",
}
"""Span names by entry: a route, never a path with ids in it (span names stay few)."""
_NAMES = {
    (method, entry): f"{method} {route}" for method in ("GET", "POST") for entry, route in _ROUTES.items()
}


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"})


def _method(method: str) -> str:
    """The method as a span name and metric label hold it: a known one, else `_OTHER` (a client
    inventing methods must not invent metric series)."""
    return method if method in _METHODS else "_OTHER"


def _server_span(call: Call, scope: Scope) -> Span | None:
    """The request's SERVER span, continuing the caller's trace when it sent a `traceparent`."""
    name, attributes = _describe(call, None)
    parent = tracing.incoming(scope["headers"]) if call.traceparent else None
    return tracing.start(name, dict(attributes), parent=parent, kind=SpanKind.SERVER)


_described: dict[tuple[Any, ...], tuple[str, dict[str, Any]]] = {}
"""`_describe`'s answers: equal requests get the same tuple, made once."""


def _describe(call: Call, outcome: tuple[int, str | None] | None) -> tuple[str, dict[str, Any]]:
    """A request's span name and attributes (its status and organization once `outcome` is known),
    each value within the tracer's bounds. The same tuple for equal requests: do not change it."""
    key = (call.method, call.path, call.entry, call.agent_id, call.client, outcome)
    described = _described.get(key)
    if described is not None:
        return described
    method = _method(call.method)
    attributes: dict[str, Any] = {
        "http.request.method": method,
        "url.path": call.path[: tracing.MAX_VALUE_CHARS],
        "ranch.entry": call.entry.value,
    }
    if call.agent_id:
        attributes["ranch.agent"] = call.agent_id[: tracing.MAX_VALUE_CHARS]
    if call.client:
        attributes["client.address"] = call.client
    if outcome is not None:
        status, org = outcome
        attributes["http.response.status_code"] = status
        if org is not None:
            attributes["ranch.org"] = org  # the organization, never a key or a name
    name = _NAMES.get((method, call.entry)) or f"{method} {_ROUTES.get(call.entry, 'other')}"
    if len(call.path) > 256:
        return name, attributes  # (a long path is not kept: the cache stays small whatever comes)
    if len(_described) >= 4096:
        _described.clear()
    described = _described[key] = (name, attributes)
    return described


def _end_server_span(span: Span, scope: Scope, status: int) -> None:
    principal = scope.get(PRINCIPAL_KEY)
    org = None if principal is None else principal.org_id
    if status >= 500:
        span.set_status(Status(StatusCode.ERROR, f"HTTP {status}"))
    span.set_attribute("http.response.status_code", status)
    if org is not None:
        span.set_attribute("ranch.org", org)
    span.end()


class _Traced:
    """The full stack's `send`: the trace id joins the response's headers, and its status is kept."""

    __slots__ = ("_send", "_trace", "status")

    def __init__(self, send: Send, trace: bytes) -> None:
        self._send = send
        self._trace = trace
        self.status = 500

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            message = {**message, "headers": [*message.get("headers", []), (TRACE_HEADER, self._trace)]}
        await self._send(message)
