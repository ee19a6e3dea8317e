"""Policies every A2A binding passes through, as endpoint wrappers.

They wrap endpoints rather than sit in the middleware stack because plain A2A 1.0
JSON-RPC calls take `FastPathApp`'s road around that stack: a wrapped endpoint is
the one place both roads share.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import orjson
from a2a.server.context import ServerCallContext
from a2a.utils.error_handlers import build_rest_error_payload
from a2a.utils.errors import A2AError, InvalidParamsError, InvalidRequestError
from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Scope

from ranch.exceptions import AgentNotFound, RateLimited, Unauthorized
from ranch.identity.resolver import CHALLENGE
from ranch.identity.security import Security
from ranch.policy.limits import check_json
from ranch.policy.logs import TRACE_ID, prefix, trace_id_from, traced
from ranch.policy.ratelimit import Decision, RatePolicy
from ranch.wire.codec import check_task_state
from ranch.wire.errors import (
    a2a_rest_error_body,
    error_body,
    headers_for,
    http_status_for,
    is_jsonrpc,
    jsonrpc_error_body,
)
from ranch.wire.fastpath import Answer, Head, Lean
from ranch.wire.jsonrpc import JsonRpcEndpoint, parse_error
from ranch.wire.streams import HeldStream

if TYPE_CHECKING:
    from ranch.catalog.registry import Registry

Endpoint = Callable[[Request], Awaitable[Response]]
logger = logging.getLogger("ranch.requests")
TRACE_HEADER = "X-Trace-Id"
TRACE_HEADER_RAW = TRACE_HEADER.lower().encode()
DEBUG_BODY_BYTES = 4096
"""Debug mode logs at most this much of each request and answer body (and the size of the rest)."""


def trace_requests(endpoint: Endpoint, *, debug: bool) -> Endpoint:
    """Serve each request under a trace id (from `traceparent`, else new), echoed in `X-Trace-Id`.

    In debug mode, each request's body and its answer (their first `DEBUG_BODY_BYTES`) and timing
    are logged (scrubbed, like every record).
    """

    async def traced_endpoint(request: Request) -> Response:
        with traced(trace_id_from(request.headers.get("traceparent"))) as trace_id:
            if not debug:
                response = await endpoint(request)
            else:
                response = await _logged(endpoint, request)
        response.headers[TRACE_HEADER] = trace_id
        return response

    return traced_endpoint


async def _logged(endpoint: Endpoint, request: Request) -> Response:
    body = await request.body()
    logger.debug("%s %s %s", request.method, request.url.path, prefix(body, DEBUG_BODY_BYTES))
    started = time.perf_counter()
    response = await endpoint(request)
    elapsed = (time.perf_counter() - started) * 1000
    sent = getattr(response, "body", b"")
    shown = prefix(bytes(sent), DEBUG_BODY_BYTES) if sent else "(streamed)"
    logger.debug(
        "answered %s in %.2f ms: %s", response.status_code, elapsed, shown, extra={"duration_ms": elapsed}
    )
    return response


def well_formed(endpoint: Endpoint) -> Endpoint:
    """Answer, in the binding's format, input the SDK's bindings would fail on with an internal error.

    The a2a-sdk parses bodies with `json.loads`, which turns invalid JSON into a parse error but
    lets invalid UTF-8 (UnicodeDecodeError) and deep nesting (RecursionError) through as 500s
    (HTTP+JSON) or -32603 (JSON-RPC), and its 0.3 HTTP+JSON adapter reads `historyLength` with a
    bare `int()`; those are refused here, before it runs.
    """

    async def checked(request: Request) -> Response:
        if request.method == "POST":
            try:
                check_json(await request.body())
            except ValueError as exc:
                if is_jsonrpc(request.url.path):
                    return Response(parse_error(exc), media_type="application/json")
                return _refused(InvalidRequestError(message=f"the request body is not valid JSON: {exc}"))
        history = request.query_params.get("historyLength") if request.method == "GET" else None
        if history and not _is_int(history):
            message = f"historyLength must be an integer, not {history[:40]!r}"
            return _refused(InvalidParamsError(message=message, data={"field": "historyLength"}))
        return await endpoint(request)

    return checked


def first_event_first(endpoint: Endpoint) -> Endpoint:
    """Send an event stream's status with its first event, so an error raised before it answers as
    an error response in the binding's format, not as a 200 cut short (`wire/streams.py`)."""

    async def held(request: Request) -> Response:
        response = await endpoint(request)
        if not isinstance(response, EventSourceResponse):
            return response

        async def refuse(exc: Exception) -> Response:
            if is_jsonrpc(request.url.path):
                return JSONResponse(jsonrpc_error_body(exc, request_id_of(await request.body())))
            payload = build_rest_error_payload(exc)  # the SDK's own: its errors, and protobuf's ParseError
            return JSONResponse(payload, status_code=payload["error"]["code"])

        return HeldStream(response, refuse)

    return held


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _refused(error: A2AError) -> Response:
    """`error` in the HTTP+JSON format, with its HTTP status."""
    return JSONResponse(a2a_rest_error_body(error), status_code=http_status_for(error))


def caller_of(scope: Scope) -> str:
    """Who is calling: the authenticated user when there is one, else the client's address."""
    user = scope.get("user")
    if user is not None and getattr(user, "is_authenticated", False):
        return f"user:{user.display_name}"
    client = scope.get("client")
    return f"ip:{client[0]}" if client else "ip:unknown"


def limit_rate(policy: RatePolicy, endpoint: Endpoint) -> Endpoint:
    """Spend one token of the caller's and one of the agent's budget, or answer 429 with Retry-After."""
    if not policy.enabled:
        return endpoint

    async def limited(request: Request) -> Response:
        key, decision = await policy.admit(caller_of(request.scope), request.path_params.get("agent_id", ""))
        if decision.allowed:
            return await endpoint(request)
        body = await request.body() if request.method == "POST" else b""
        return rate_limited(request.url.path, key, decision, body)

    return limited


def rate_limited(path: str, key: str, decision: Decision, body: bytes) -> Response:
    """429 in the format of the binding at `path`, with Retry-After, answering the request's id."""
    error = RateLimited(key, decision.retry_after)
    return JSONResponse(
        error_body(path, error, request_id_of(body) if body else None),
        status_code=http_status_for(error),
        headers=headers_for(error),
    )


def lean_edge(
    endpoint: JsonRpcEndpoint,
    policy: RatePolicy,
    context: Callable[[str, Scope], ServerCallContext],
) -> Lean:
    """The fast path's policies, the same as the wrapped endpoints': trace id, rate limit, binding.

    Only for servers without keys and without debug logging (the app decides): those need the
    `Request` the full wrappers read.
    """

    limited = policy.enabled

    async def lean(head: Head, scope: Scope, body: bytes) -> Answer | Response | None:
        trace_id = trace_id_from(head.traceparent)
        token = TRACE_ID.set(trace_id)
        try:
            if limited:
                key, decision = await policy.admit(caller_of(scope), head.agent_id)
                if not decision.allowed:
                    response = rate_limited(scope["path"], key, decision, body)
                    response.headers[TRACE_HEADER] = trace_id
                    return response
            answer = await endpoint.answer(body, lambda: context(head.agent_id, scope))
        finally:
            TRACE_ID.reset(token)
        if isinstance(answer, bytes):
            return Answer(answer, [(TRACE_HEADER_RAW, trace_id.encode())])
        if isinstance(answer, Response):
            answer.headers[TRACE_HEADER] = trace_id
            return answer
        return None  # an A2A 0.3 method name: the full stack hands it to the SDK's dispatcher

    return lean


def request_id_of(body: bytes) -> str | int | None:
    """The JSON-RPC `id` of a request body, to answer an error with (None when there is none)."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    value = data.get("id") if isinstance(data, dict) else None
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


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


def guard_agent(registry: Registry, endpoint: Callable[[Request], Awaitable[Response]]) -> Callable[..., Any]:
    """Answer an unknown agent id in the URL with a clear error, before the SDK's binding runs."""

    async def guarded(request: Request) -> Response:
        agent_id = request.path_params.get("agent_id", "")
        if agent_id in registry:
            return await endpoint(request)
        error = AgentNotFound(agent_id, registry.ids())
        request_id = None
        if request.method == "POST":
            request_id = request_id_of(await request.body())
        return JSONResponse(
            error_body(request.url.path, error, request_id), status_code=http_status_for(error)
        )

    return guarded


def rooted(agent_id: str, endpoint: Callable[[Request], Awaitable[Response]]) -> Callable[..., Any]:
    """Serve `endpoint` for `agent_id` on a path without `{agent_id}` (`ranch serve --root`)."""

    async def at_root(request: Request) -> Response:
        request.scope["path_params"] = {**request.path_params, "agent_id": agent_id}
        return await endpoint(request)

    return at_root


def check_list_query(endpoint: Callable[[Request], Awaitable[Response]]) -> Callable[..., Any]:
    """HTTP+JSON ListTasks: a `status` that names no task state is refused, not read as "any"."""

    async def checked(request: Request) -> Response:
        statuses = request.query_params.getlist("status")
        try:
            check_task_state(statuses[-1] if statuses else None)
        except A2AError as exc:
            return JSONResponse(error_body(request.url.path, exc), status_code=http_status_for(exc))
        return await endpoint(request)

    return checked
