"""Wrappers that make the a2a-sdk's bindings answer as ranch's own do, on the full stack.

They are not guards (the chain has run before any of them): each fixes one way the SDK's
JSON-RPC or HTTP+JSON binding would answer badly formed input, an early stream error, or an
unknown method less clearly than ranch's fast binding does.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from a2a.utils.error_handlers import build_rest_error_payload
from a2a.utils.errors import A2AError, InvalidParamsError, InvalidRequestError
from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ranch.edge.guards import request_id_of
from ranch.policy.limits import check_json
from ranch.wire.codec import check_task_state
from ranch.wire.errors import a2a_rest_error_body, error_body, http_status_for, is_jsonrpc, jsonrpc_error_body
from ranch.wire.jsonrpc import parse_error, unknown_method
from ranch.wire.streams import HeldStream

Endpoint = Callable[[Request], Awaitable[Response]]


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


def check_list_query(endpoint: Endpoint) -> Endpoint:
    """HTTP+JSON ListTasks: a `status` that names no task state is refused, not read as "any"."""

    async def checked(request: Request) -> Response:
        statuses = request.query_params.getlist("status")
        try:
            check_task_state(statuses[-1] if statuses else None)
        except A2AError as exc:
            return JSONResponse(error_body(request.url.path, exc), status_code=http_status_for(exc))
        return await endpoint(request)

    return checked


def with_clearer_sdk_errors(endpoint: Endpoint) -> Endpoint:
    """Wrap an SDK dispatcher so "Method not found" / "Invalid Request" say which method or what is wrong."""

    async def explain_errors(request: Request) -> Response:
        response = await endpoint(request)
        body = getattr(response, "body", b"")
        if b'"code":-32601' in body or b'"code":-32600' in body:
            return await _explain(request, response)
        return response

    return explain_errors


async def _explain(request: Request, response: Response) -> Response:
    try:
        data = json.loads(await request.body())
        payload = json.loads(bytes(response.body))
        error = payload["error"]
    except (ValueError, KeyError, TypeError):
        return response
    if error.get("code") == -32601:
        method = data.get("method") if isinstance(data, dict) else None
        error["message"] = unknown_method(str(method))
    else:
        details = error.get("data") if isinstance(error.get("data"), list) else []
        reasons = [d.get("metadata", {}).get("parseError") for d in details if isinstance(d, dict)]
        if any(reasons):
            error["message"] = f"{error.get('message', 'Invalid Request')}: {next(r for r in reasons if r)}"
    return JSONResponse(payload, status_code=response.status_code)


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _refused(error: A2AError) -> Response:
    """`error` in the HTTP+JSON format, with its HTTP status."""
    return JSONResponse(a2a_rest_error_body(error), status_code=http_status_for(error))
