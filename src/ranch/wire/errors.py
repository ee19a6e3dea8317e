"""One table of errors: each A2A and ranch error has one JSON-RPC code and one HTTP status.

Every binding answers from this table: ranch's lean JSON-RPC path, the a2a-sdk's
dispatchers (JSON-RPC 0.3 and HTTP+JSON), ranch's own middleware, and the hub's
REST API (`rest_error_body`). A2A's errors keep the codes the A2A spec gives them;
ranch's own use -32050..-32069 (docs/errors.md lists them all, with examples).

The a2a-sdk's bindings look an error's code up by its exact type in their public
tables (`JSON_RPC_ERROR_CODE_MAP`, `A2A_ERROR_MAPPING`). `to_a2a` turns a ranch
error into an `A2AError` of a class registered in those tables from this one, so
a ranch error raised inside the request handler gets the same answer on each binding.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass
from typing import Any

from a2a.server.jsonrpc_models import JSONRPCError
from a2a.server.request_handlers import response_helpers
from a2a.utils import error_handlers
from a2a.utils import errors as sdk
from a2a.utils.errors import A2AError

from ranch import exceptions as ranch
from ranch.identity.resolver import CHALLENGE
from ranch.observe import metrics

JSONRPC_PATH = re.compile(r"^(/a2a/agents/[^/]+)?/?$")
"""An agent's JSON-RPC endpoint, or the root (`ranch serve --root`)."""
API_PREFIX = "/api/"
"""The hub's REST API: errors there are `{"error": {"code", "message", "field"}}` (docs/api.md)."""


@dataclass(frozen=True)
class ErrorCode:
    """How one kind of error looks on the wire."""

    jsonrpc: int
    """The JSON-RPC `error.code`."""
    http: int
    """The HTTP status on HTTP+JSON and REST (and on JSON-RPC for 413 and 429)."""
    reason: str
    """The string code: `error.code` in the REST API, `ErrorInfo.reason` on A2A."""
    grpc: str
    """The gRPC-style `status` in A2A HTTP+JSON error bodies."""


INTERNAL = ErrorCode(-32603, 500, "INTERNAL_ERROR", "INTERNAL")

_A2A: dict[type[Exception], ErrorCode] = {
    cls: ErrorCode(sdk.JSON_RPC_ERROR_CODE_MAP[cls], m.http_code, m.reason, m.grpc_status)
    for cls, m in sdk.A2A_ERROR_MAPPING.items()
}
_A2A[sdk.JSONParseError] = ErrorCode(-32700, 400, "PARSE_ERROR", "INVALID_ARGUMENT")

_RANCH: dict[type[Exception], ErrorCode] = {
    ranch.AgentNotFound: ErrorCode(-32050, 404, "AGENT_NOT_FOUND", "NOT_FOUND"),
    ranch.InvalidRecipient: ErrorCode(-32051, 422, "INVALID_RECIPIENT", "FAILED_PRECONDITION"),
    ranch.HopLimitExceeded: ErrorCode(-32052, 422, "HOP_LIMIT_EXCEEDED", "FAILED_PRECONDITION"),
    ranch.RoutingLoop: ErrorCode(-32057, 422, "ROUTING_LOOP", "FAILED_PRECONDITION"),
    ranch.BudgetExceeded: ErrorCode(-32058, 422, "BUDGET_EXCEEDED", "RESOURCE_EXHAUSTED"),
    ranch.AgentUnavailable: ErrorCode(-32053, 503, "AGENT_UNAVAILABLE", "UNAVAILABLE"),
    ranch.AgentTimeout: ErrorCode(-32054, 504, "AGENT_TIMEOUT", "DEADLINE_EXCEEDED"),
    ranch.InvalidAgentReply: ErrorCode(-32006, 502, "INVALID_AGENT_RESPONSE", "INTERNAL"),
    ranch.AgentError: ErrorCode(-32055, 502, "AGENT_ERROR", "INTERNAL"),
    ranch.ExtensionSupportRequired: ErrorCode(
        -32008, 400, "EXTENSION_SUPPORT_REQUIRED", "FAILED_PRECONDITION"
    ),
    ranch.InvalidInput: ErrorCode(-32602, 400, "INVALID_PARAMS", "INVALID_ARGUMENT"),
    ranch.UnsafeUrl: ErrorCode(-32602, 400, "UNSAFE_URL", "INVALID_ARGUMENT"),
    ranch.PayloadTooLarge: ErrorCode(-32602, 413, "PAYLOAD_TOO_LARGE", "INVALID_ARGUMENT"),
    ranch.UnsupportedContent: ErrorCode(-32005, 415, "CONTENT_TYPE_NOT_SUPPORTED", "INVALID_ARGUMENT"),
    ranch.BodyTooLarge: ErrorCode(-32600, 413, "REQUEST_TOO_LARGE", "INVALID_ARGUMENT"),
    ranch.RateLimited: ErrorCode(-32060, 429, "RATE_LIMITED", "RESOURCE_EXHAUSTED"),
    ranch.Unauthorized: ErrorCode(-32061, 401, "UNAUTHENTICATED", "UNAUTHENTICATED"),
    ranch.Forbidden: ErrorCode(-32062, 403, "PERMISSION_DENIED", "PERMISSION_DENIED"),
    ranch.SessionExpired: ErrorCode(-32063, 401, "SESSION_EXPIRED", "UNAUTHENTICATED"),
    ranch.NotFound: ErrorCode(-32064, 404, "NOT_FOUND", "NOT_FOUND"),
    ranch.Conflict: ErrorCode(-32065, 409, "CONFLICT", "FAILED_PRECONDITION"),
    ranch.Unprocessable: ErrorCode(-32066, 422, "UNPROCESSABLE", "FAILED_PRECONDITION"),
    ranch.StoreUnavailable: ErrorCode(-32056, 503, "STORE_UNAVAILABLE", "UNAVAILABLE"),
    ranch.ServerBusy: ErrorCode(-32067, 503, "SERVER_BUSY", "UNAVAILABLE"),
}

TABLE: dict[type[Exception], ErrorCode] = {**_A2A, **_RANCH}
"""Every error ranch answers with, A2A's and ranch's; anything else is INTERNAL (500, -32603)."""


def code_for(exc: BaseException) -> ErrorCode:
    """The table row for `exc`: its own class's, else its nearest listed base class's."""
    for cls in type(exc).__mro__:
        row = TABLE.get(cls)
        if row is not None:
            return row
    return INTERNAL


def http_status_for(exc: BaseException) -> int:
    return code_for(exc).http


def jsonrpc_code_for(exc: BaseException) -> int:
    return code_for(exc).jsonrpc


def field_of(exc: BaseException) -> str | None:
    """The request field at fault, when the error names one."""
    field = getattr(exc, "field", None)
    if field is None and isinstance(exc, A2AError) and isinstance(exc.data, dict):
        field = exc.data.get("field")
    return field if isinstance(field, str) else None


def message_of(exc: BaseException, *, debug: bool = False) -> str:
    """What the caller is told; an unexpected error says only that, unless in debug mode."""
    if code_for(exc) is INTERNAL and not isinstance(exc, A2AError) and not debug:
        return "internal error; the server log has the details"
    return exc.message if isinstance(exc, A2AError) else str(exc)


def retry_after(exc: BaseException) -> int | None:
    """Whole seconds for the `Retry-After` header (at least 1), for errors that have one."""
    seconds = getattr(exc, "retry_after", None)
    if not isinstance(seconds, int | float):
        return None
    return max(1, int(-(-seconds // 1)))


def rest_error_body(exc: BaseException, *, debug: bool = False) -> dict[str, Any]:
    """The REST API's error body: `{"error": {"code", "message", "field"}}` (+ `trace` in debug mode)."""
    error: dict[str, Any] = {
        "code": code_for(exc).reason,
        "message": message_of(exc, debug=debug),
        "field": field_of(exc),
    }
    wait = retry_after(exc)
    if wait is not None:
        error["retryAfter"] = wait
    if debug and code_for(exc) is INTERNAL:
        error["trace"] = "".join(traceback.format_exception(exc))
    return {"error": error}


def headers_for(exc: BaseException) -> dict[str, str]:
    """HTTP headers that go with the error: `Retry-After` for rate limits, the challenge with a 401."""
    if isinstance(exc, ranch.Unauthorized):
        return {"WWW-Authenticate": CHALLENGE}
    wait = retry_after(exc)
    return {} if wait is None else {"Retry-After": str(wait)}


# -- A2A bindings ---------------------------------------------------------------------------------


_WIRE: dict[type[Exception], type[A2AError]] = {}


def _wire_class(row_class: type[Exception]) -> type[A2AError]:
    """The A2AError class standing for `row_class` on the SDK's bindings, registered in its tables."""
    wire = _WIRE.get(row_class)
    if wire is None:
        row = TABLE[row_class]
        wire = type(f"{row_class.__name__}Error", (A2AError,), {"__module__": __name__})
        sdk.JSON_RPC_ERROR_CODE_MAP[wire] = row.jsonrpc
        sdk.A2A_ERROR_MAPPING[wire] = sdk.ErrorMapping(row.http, row.grpc, row.reason)
        sdk.A2A_ERROR_REASONS[wire] = row.reason
        response_helpers.EXCEPTION_MAP[wire] = JSONRPCError
        _WIRE[row_class] = wire
    return wire


for _row_class in _RANCH:
    _wire_class(_row_class)


def to_a2a(exc: BaseException, *, debug: bool = False) -> A2AError:
    """`exc` as an A2AError every binding maps through the table; A2A errors pass through."""
    if isinstance(exc, A2AError):
        return exc
    metrics.error(type(exc).__name__)
    row_class = next((cls for cls in type(exc).__mro__ if cls in _RANCH), None)
    if row_class is None:
        return sdk.InternalError(message_of(exc, debug=debug))
    data: dict[str, Any] = {}
    field = field_of(exc)
    if field is not None:
        data["field"] = field
    wait = retry_after(exc)
    if wait is not None:
        data["retryAfter"] = str(wait)
    wire = _wire_class(row_class)(message_of(exc), data=data or None)
    wire.__cause__ = exc
    return wire


def is_jsonrpc(path: str) -> bool:
    return JSONRPC_PATH.match(path) is not None


def jsonrpc_error_body(exc: BaseException, request_id: Any = None, *, debug: bool = False) -> dict[str, Any]:
    """A JSON-RPC 2.0 error response for `exc`."""
    return response_helpers.build_error_response(request_id, to_a2a(exc, debug=debug))


def a2a_rest_error_body(exc: BaseException, *, debug: bool = False) -> dict[str, Any]:
    """The A2A HTTP+JSON error body: `{"error": {"code": <HTTP status>, "status", "message", "details"}}`."""
    return error_handlers.build_rest_error_payload(to_a2a(exc, debug=debug))


def error_body(
    path: str, exc: BaseException, request_id: Any = None, *, debug: bool = False
) -> dict[str, Any]:
    """`exc` in the format of the entry `path` belongs to: JSON-RPC, A2A HTTP+JSON, or the hub's REST API."""
    if is_jsonrpc(path):
        return jsonrpc_error_body(exc, request_id, debug=debug)
    if path.startswith(API_PREFIX):
        return rest_error_body(exc, debug=debug)
    return a2a_rest_error_body(exc, debug=debug)


_HTTP_STATUS = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 405: "UNIMPLEMENTED", 413: "INVALID_ARGUMENT"}


def http_error_body(status: int, message: str, path: str = "") -> dict[str, Any]:
    """An HTTP-level error (no route, wrong method): the REST shape under /api, else A2A HTTP+JSON's."""
    if path.startswith(API_PREFIX):
        reason = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(status, "INVALID_PARAMS")
        return {"error": {"code": reason, "message": message, "field": None}}
    return {"error": {"code": status, "status": _HTTP_STATUS.get(status, "UNKNOWN"), "message": message}}
