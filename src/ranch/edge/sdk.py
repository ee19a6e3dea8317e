"""Wrappers that make the a2a-sdk's bindings answer as ranch's own do, on the full stack.

They are not guards (the chain has run before any of them): each fixes one way the SDK's
JSON-RPC or HTTP+JSON binding would answer badly formed input, an early stream error, or an
unknown method less clearly than ranch's fast binding does.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
from a2a.utils import json_utils
from a2a.utils.error_handlers import build_rest_error_payload
from a2a.utils.errors import A2AError, InvalidParamsError, InvalidRequestError
from sse_starlette import EventSourceResponse
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ranch.edge import v03
from ranch.edge.guards import request_id_of
from ranch.exceptions import InvalidInput
from ranch.policy.limits import Limits, check_json, load_json
from ranch.wire.codec import check_task_state
from ranch.wire.errors import (
    a2a_rest_error_body,
    error_body,
    http_status_for,
    is_jsonrpc,
    jsonrpc_code_for,
    jsonrpc_error_body,
    to_a2a,
)
from ranch.wire.fastpath import replay
from ranch.wire.jsonrpc import parse_error, unknown_method
from ranch.wire.streams import HeldStream

Endpoint = Callable[[Request], Awaitable[Response]]
LIMITS = Limits()
"""The depth and key rules checked on 0.3 messages before conversion (not configurable, as in `Settings`)."""


def well_formed(endpoint: Endpoint) -> Endpoint:
    """Answer, in the binding's format, input the SDK's bindings would fail on with an internal error.

    The a2a-sdk parses bodies with `json.loads`, which turns invalid JSON into a parse error but
    lets invalid UTF-8 (UnicodeDecodeError), NUL bytes (read as UTF-32, then UnicodeDecodeError)
    and deep nesting (RecursionError) through as 500s (HTTP+JSON) or -32603 (JSON-RPC), and its
    0.3 HTTP+JSON adapter reads `historyLength` with a bare `int()` (past int32, a 500); those are
    refused here, before it runs. A 0.3 message is checked and mended as JSON before the 0.3
    adapters convert it (`ranch.edge.v03`), and their answers' file bytes are mended too.
    """

    async def checked(request: Request) -> Response:
        if request.method == "POST":
            body = await request.body()
            try:
                check_json(body)
            except ValueError as exc:
                if is_jsonrpc(request.url.path):
                    return Response(parse_error(exc), media_type="application/json")
                return _refused(InvalidRequestError(message=f"the request body is not valid JSON: {exc}"))
            try:
                request = _a2a03_message_checked(request, body)
            except InvalidInput as exc:
                if is_jsonrpc(request.url.path):
                    return _refused_03(exc, request_id_of(body))
                return _refused(exc)
        refused = query_integers_refused(request.query_params) if request.method == "GET" else None
        if refused is not None:
            return _refused(refused)
        response = await endpoint(request)
        unversioned = "a2a-version" not in request.headers
        if unversioned and b"VERSION_NOT_SUPPORTED" in getattr(response, "body", b""):
            return await _version_header_named(request, response)
        return _file_bytes_mended(response) if _a2a03_http(request) else response

    return checked


async def _version_header_named(request: Request, response: Response) -> Response:
    """The SDK answers an A2A 1.0 call sent without `A2A-Version` "A2A version '0.3' is not supported
    ...", as if the caller had asked for 0.3: say the header is missing, and what to send."""
    try:
        payload = json.loads(bytes(response.body))
        error = payload["error"]
        body = json.loads(await request.body()) if is_jsonrpc(request.url.path) else {}
    except (ValueError, KeyError, TypeError):
        return response
    method = body.get("method") if isinstance(body, dict) else None
    what = f"{method} is an A2A 1.0 method" if isinstance(method, str) else "this is an A2A 1.0 endpoint"
    error["message"] = (
        f"the A2A-Version header is missing: {what}, and a request without the header is read as "
        "A2A 0.3; send 'A2A-Version: 1.0'"
    )
    return JSONResponse(payload, status_code=response.status_code)


def _a2a03_http(request: Request) -> bool:
    """Whether the request's route is one of the SDK's A2A 0.3 HTTP+JSON routes (`.../v1/...`): the
    route's template is read, so an agent named `v1` is not mistaken for one."""
    template = getattr(request.scope.get("route"), "path", "")
    return isinstance(template, str) and (template.startswith("/v1/") or "}/v1/" in template)


def _a2a03_message_checked(request: Request, body: bytes) -> Request:
    """The request, its A2A 0.3 message checked (InvalidInput) and, on HTTP+JSON, mended. A body
    that is not JSON is left to the SDK, which answers it well."""
    path = request.url.path
    if is_jsonrpc(path):
        if b"message/" in body:  # (a quick test first: most calls are not 0.3 sends)
            data = _json_or_none(body)
            if isinstance(data, dict) and data.get("method") in v03.JSONRPC_MESSAGE_METHODS:
                v03.check_jsonrpc_params(data.get("params"), LIMITS)
        return request
    if not path.endswith(v03.HTTP_MESSAGE_PATHS) or not _a2a03_http(request):
        return request
    data = _json_or_none(body)
    if not v03.mend_http_body(data, LIMITS):
        return request
    return Request(request.scope, replay(orjson.dumps(data), request.receive))


def _json_or_none(body: bytes) -> Any:
    try:
        return load_json(body)
    except ValueError:
        return None


def _file_bytes_mended(response: Response) -> Response:
    """An A2A 0.3 HTTP+JSON answer with its files' bytes encoded once (`v03.answer_file_bytes`)."""
    stream = response.stream if isinstance(response, HeldStream) else response
    if isinstance(stream, EventSourceResponse):
        stream.body_iterator = _events_mended(stream.body_iterator)
        return response
    body = getattr(response, "body", b"")
    if not isinstance(body, bytes) or b'"fileWithBytes"' not in body or response.status_code >= 300:
        return response
    headers = {k: v for k, v in response.headers.items() if k not in ("content-length", "content-type")}
    mended = v03.answer_file_bytes(json.loads(body))
    return JSONResponse(mended, status_code=response.status_code, headers=headers)


async def _events_mended(events: AsyncIterable[Any]) -> AsyncIterator[Any]:
    async for event in events:
        if isinstance(event, str) and '"fileWithBytes"' in event:
            event = json_utils.dumps(v03.answer_file_bytes(json.loads(event)))  # as the SDK writes it
        yield event


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
    """Wrap an SDK dispatcher so "Method not found" / "Invalid Request" say which method or what is
    wrong, and its log tells a caller's mistake as a warning (`ClientMistakesAsWarnings`)."""
    ClientMistakesAsWarnings.install()

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


INT32_MAX = 2**31 - 1
QUERY_INTEGERS = {"historyLength": INT32_MAX, "pageSize": INT32_MAX}
"""The whole numbers the HTTP+JSON bindings (1.0 and 0.3) read from a query string, and the largest
the field each goes to holds (protobuf int32s)."""


def query_integers_refused(query: QueryParams) -> InvalidParamsError | None:
    """The error for the first whole-number parameter its field cannot hold, else None.

    Digits only (`int()` would also take `+5`, ` 5`, `1_0`), from 0 to the field's largest.
    """
    for name, largest in QUERY_INTEGERS.items():
        for text in query.getlist(name):
            if not _whole(text, largest):
                message = f"{name} must be a whole number from 0 to {largest}, not {text[:40]!r}"
                return InvalidParamsError(message=message, data={"field": name})
    return None


def _whole(text: str, largest: int) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= len(str(largest)) and int(text) <= largest


def _refused_03(error: Exception, request_id: Any) -> Response:
    """`error` as the SDK's A2A 0.3 JSON-RPC adapter answers it (`data` as is, not 1.0's ErrorInfo)."""
    wire = to_a2a(error)
    body = {"code": jsonrpc_code_for(error), "message": wire.message, "data": wire.data}
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": body})


def _refused(error: Exception) -> Response:
    """`error` in the HTTP+JSON format, with its HTTP status."""
    return JSONResponse(a2a_rest_error_body(error), status_code=http_status_for(error))


class ClientMistakesAsWarnings(logging.Filter):
    """The SDK's JSON-RPC dispatchers log a request that is not a valid JSON-RPC call, or whose
    params do not validate, at ERROR with its traceback: a caller's mistake, answered -32600 or
    -32602, that looks like a fault of the server. Here it is a WARNING line saying why."""

    LOGGERS = ("a2a.server.routes.jsonrpc_dispatcher", "a2a.compat.v0_3.jsonrpc_adapter")
    MISTAKES = frozenset(
        {
            "Failed to validate base JSON-RPC request",
            "Failed to validate base JSON-RPC request for v0.3",
            "Failed to parse request params",
        }
    )

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR and record.msg in self.MISTAKES:
            problem = record.exc_info[1] if record.exc_info else None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg = f"{record.msg} (the caller's mistake): {problem}"
            record.args, record.exc_info, record.exc_text = None, None, None
        return True

    @classmethod
    def install(cls) -> None:
        """On the SDK's loggers, once."""
        for name in cls.LOGGERS:
            logger = logging.getLogger(name)
            if not any(isinstance(f, cls) for f in logger.filters):
                logger.addFilter(cls())
