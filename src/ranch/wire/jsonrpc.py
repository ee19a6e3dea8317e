"""A2A 1.0 JSON-RPC binding, lean: the hot path of every hop ranch serves.

The a2a-sdk's `JsonRpcDispatcher` costs several times ranch's own work per request (tracing
wrappers, a generic JSON-RPC library, header copies, dict <-> protobuf twice);
bench/README.md shows it, not the agent, is what limits throughput. This binding
parses with orjson, checks the envelope, dispatches by method to the same
`RequestHandler`, and serialises the same protobuf results with the same
`MessageToDict` rules, so the JSON on the wire is identical (tests/wire prove it
against the SDK's dispatcher). Requests without `A2A-Version` are A2A 0.3: they go
to the SDK's dispatcher, which owns the 0.3 conversion.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import orjson
from a2a.server.context import ServerCallContext
from a2a.server.jsonrpc_models import JSONParseError, JSONRPCError, MethodNotFoundError
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.server.routes.common import serialize_list_tasks_response
from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils import proto_utils
from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    TaskNotFoundError,
)
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message as Proto
from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request
from starlette.responses import Response

from ranch.wire import codec

logger = logging.getLogger(__name__)
Context = ServerCallContext
ContextFactory = Callable[[Request], ServerCallContext]
A2A_METHODS = (
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
)


class Use03Dispatcher:
    """The answer `JsonRpcEndpoint.answer` gives a 0.3 method name: the SDK's dispatcher owns it."""


DELEGATE_TO_SDK = Use03Dispatcher()


@dataclass(frozen=True)
class _Method:
    params: type[Proto]
    call: Callable[[RequestHandler, Any, Context], Awaitable[Any]] | None = None
    stream: Callable[[RequestHandler, Any, Context], AsyncIterator[Any]] | None = None


async def _send(handler: RequestHandler, params: Any, context: Context) -> Any:
    result = await handler.on_message_send(params, context)
    if isinstance(result, Task):
        return {"task": codec.to_json(result)}
    return {"message": codec.to_json(result)}


async def _get_task(handler: RequestHandler, params: Any, context: Context) -> Any:
    task = await handler.on_get_task(params, context)
    if task is None:
        raise TaskNotFoundError()
    return codec.to_json(task)


async def _cancel_task(handler: RequestHandler, params: Any, context: Context) -> Any:
    task = await handler.on_cancel_task(params, context)
    if task is None:
        raise TaskNotFoundError()
    return codec.to_json(task)


async def _list_tasks(handler: RequestHandler, params: Any, context: Context) -> Any:
    return serialize_list_tasks_response(
        await handler.on_list_tasks(params, context), params.include_artifacts
    )


def _proto_call(name: str) -> Callable[[RequestHandler, Any, Context], Awaitable[Any]]:
    async def call(handler: RequestHandler, params: Any, context: Context) -> Any:
        result = await getattr(handler, name)(params, context)
        return None if result is None else MessageToDict(result)

    return call


METHODS: dict[str, _Method] = {
    "SendMessage": _Method(SendMessageRequest, call=_send),
    "SendStreamingMessage": _Method(
        SendMessageRequest, stream=lambda h, p, c: h.on_message_send_stream(p, c)
    ),
    "GetTask": _Method(GetTaskRequest, call=_get_task),
    "ListTasks": _Method(ListTasksRequest, call=_list_tasks),
    "CancelTask": _Method(CancelTaskRequest, call=_cancel_task),
    "SubscribeToTask": _Method(SubscribeToTaskRequest, stream=lambda h, p, c: h.on_subscribe_to_task(p, c)),
    "CreateTaskPushNotificationConfig": _Method(
        TaskPushNotificationConfig, call=_proto_call("on_create_task_push_notification_config")
    ),
    "GetTaskPushNotificationConfig": _Method(
        GetTaskPushNotificationConfigRequest, call=_proto_call("on_get_task_push_notification_config")
    ),
    "ListTaskPushNotificationConfigs": _Method(
        ListTaskPushNotificationConfigsRequest, call=_proto_call("on_list_task_push_notification_configs")
    ),
    "DeleteTaskPushNotificationConfig": _Method(
        DeleteTaskPushNotificationConfigRequest, call=_proto_call("on_delete_task_push_notification_config")
    ),
    "GetExtendedAgentCard": _Method(
        GetExtendedAgentCardRequest, call=_proto_call("on_get_extended_agent_card")
    ),
}


class JsonRpcEndpoint:
    """`POST /a2a/agents/{id}`: A2A 1.0 here, A2A 0.3 through the SDK's dispatcher."""

    def __init__(
        self,
        handler: RequestHandler,
        context: ContextFactory,
        legacy: Callable[[Request], Awaitable[Response]],
    ) -> None:
        self.handler = handler
        self.context = context
        self.legacy = legacy

    async def __call__(self, request: Request) -> Response:
        version = request.headers.get("a2a-version")
        if not version or not version.startswith("1"):
            return await self.legacy(request)  # the SDK's dispatcher: 0.3, or a version it will refuse
        answer = await self.answer(await request.body(), lambda: self.context(request))
        if isinstance(answer, Use03Dispatcher):
            return await self.legacy(request)  # 0.3 method names go to the 0.3 adapter, as in the SDK
        if isinstance(answer, bytes):
            return Response(answer, media_type="application/json")
        return answer

    async def answer(self, raw: bytes, context: Callable[[], Context]) -> bytes | Response | Use03Dispatcher:
        """The answer to one A2A 1.0 JSON-RPC body: JSON bytes, a stream, or DELEGATE_TO_SDK for a 0.3 name.

        Plain answers are bytes so the fast path can send them without a Response object;
        `context` is called once the request is known to be well formed.
        """
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            return parse_error(exc)
        request_id, method, problem = _envelope(body)
        if problem is not None:
            return _error(request_id, problem)
        entry = METHODS.get(method)
        if entry is None:
            if method in _legacy_methods():
                return DELEGATE_TO_SDK
            return _error(request_id, MethodNotFoundError(message=unknown_method(method)))
        raw_params = body.get("params")
        if raw_params is not None and not isinstance(raw_params, dict):
            return _error(request_id, InvalidParamsError(message="params must be a JSON object"))
        try:
            params = codec.parse(raw_params or {}, entry.params)
        except codec.ParamsError as exc:
            return _error(request_id, InvalidParamsError(message=str(exc), data={"parseError": str(exc)}))
        if method == "ListTasks" and raw_params:
            try:
                codec.check_task_state(raw_params.get("status"))
            except A2AError as exc:
                return _error(request_id, exc)
        try:
            if entry.stream is not None:
                return await self._stream(request_id, entry.stream(self.handler, params, context()))
            assert entry.call is not None
            result = await entry.call(self.handler, params, context())
        except A2AError as exc:
            return _error(request_id, exc)
        except Exception:  # a bug answers -32603 without details (they go to the log), never a 500
            logger.exception("%s failed", method)
            return _error(request_id, InternalError("internal error; the server log has the details"))
        return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})

    async def _stream(self, request_id: Any, events: AsyncIterator[Any]) -> Response:
        # the first event is fetched here, so an upfront error is a plain JSON-RPC error response
        try:
            first = await anext(events)
        except StopAsyncIteration:
            first = None
        if isinstance(first, Message):  # a Message ends an A2A stream: send it whole, no stream machinery
            await _close(events)
            return Response(
                SSE_DATA + _frame(request_id, first)["data"].encode() + SSE_END, headers=SSE_HEADERS
            )

        async def frames() -> AsyncGenerator[dict[str, str]]:
            try:
                if first is not None:
                    yield _frame(request_id, first)
                async for event in events:
                    yield _frame(request_id, event)
            except A2AError as exc:
                yield {"event": "error", "data": orjson.dumps(build_error_response(request_id, exc)).decode()}

        return EventSourceResponse(frames())


def _frame(request_id: Any, event: Any) -> dict[str, str]:
    """One SSE data frame; an event fanned out to many subscribers is encoded once."""
    cached = _ENCODED.get(id(event))
    if cached is None or cached[0] is not event:
        cached = (event, orjson.dumps(codec.to_json(proto_utils.to_stream_response(event))))
        _ENCODED[id(event)] = cached
        if len(_ENCODED) > ENCODED_EVENTS:
            _ENCODED.pop(next(iter(_ENCODED)))
    head = b'{"jsonrpc":"2.0","id":' + orjson.dumps(request_id) + b',"result":'
    return {"data": (head + cached[1] + b"}").decode()}


async def _close(events: AsyncIterator[Any]) -> None:
    closer = getattr(events, "aclose", None)
    if closer is not None:
        await closer()


ENCODED_EVENTS = 256
"""Recent events kept with their JSON, keyed by identity (each event is held, so its id stays its own)."""
_ENCODED: dict[int, tuple[Any, bytes]] = {}
SSE_DATA, SSE_END = b"data: ", b"\r\n\r\n"
SSE_HEADERS = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-store",
    "X-Accel-Buffering": "no",
}


def _envelope(body: Any) -> tuple[Any, str, A2AError | None]:
    """Check the JSON-RPC 2.0 envelope; return (id, method, problem)."""
    if not isinstance(body, dict):
        kind = (
            "Batch requests are not supported"
            if isinstance(body, list)
            else "the request must be a JSON object"
        )
        return None, "", InvalidRequestError(message=f"Invalid Request: {kind}")
    request_id = body.get("id")
    if isinstance(request_id, bool) or not (request_id is None or isinstance(request_id, str | int)):
        return None, "", InvalidRequestError(message="Invalid Request: id must be a string, integer, or null")
    if body.get("jsonrpc") != "2.0":
        return request_id, "", InvalidRequestError(message="Invalid Request: 'jsonrpc' must be exactly '2.0'")
    method = body.get("method")
    if not isinstance(method, str) or not method:
        return (
            request_id,
            "",
            InvalidRequestError(message="Invalid Request: 'method' must be a non-empty string"),
        )
    return request_id, method, None


@cache
def _legacy_methods() -> frozenset[str]:
    """The A2A 0.3 method names the SDK's adapter serves (imported late: the SDK has an import cycle)."""
    from a2a.compat.v0_3.jsonrpc_adapter import JSONRPC03Adapter

    return frozenset(JSONRPC03Adapter.METHOD_TO_MODEL)


def unknown_method(method: str) -> str:
    """The message for -32601: which method, and which exist."""
    return (
        f"method {method!r} does not exist; A2A 1.0 methods are {', '.join(A2A_METHODS)} "
        "(A2A 0.3 names such as message/send are served when no A2A-Version header is sent)"
    )


def parse_error(problem: Exception) -> bytes:
    """The JSON-RPC -32700 answer to a body that is not JSON, saying why (`problem`)."""
    return _error(None, JSONParseError(message=f"the request body is not valid JSON: {problem}"))


def _error(request_id: Any, error: A2AError | JSONRPCError) -> bytes:
    return orjson.dumps(build_error_response(request_id, error))
