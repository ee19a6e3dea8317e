"""`GuardedGrpcHandler`: the a2a-sdk's gRPC servicer over ranch's one request handler, each call
guarded, traced and logged as an HTTP request is (`edge/app.py`), its errors from the one table."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any, TypeVar

import grpc
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.grpc_handler import GrpcHandler
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.utils.errors import A2AError
from google.protobuf.message import Message
from opentelemetry.trace import SpanKind, Status, StatusCode

from ranch.db.engine import unavailable
from ranch.edge.grpc.admission import EXTENSIONS_METADATA, admit, metadata_of, peer_address, read_call
from ranch.edge.grpc.status import rich_status
from ranch.edge.guards import TRACE_KEY, Call, Guards
from ranch.exceptions import InvalidInput, RanchError, RateLimited
from ranch.identity.live import Bound, Live
from ranch.observe import metrics, tracing
from ranch.policy.logs import TRACE_ID, AccessLog, trace_id_from
from ranch.wire.errors import http_status_for
from ranch.wire.middleware import SCOPE_KEY

logger = logging.getLogger(__name__)
SERVICE = "lf.a2a.v1.A2AService"
T = TypeVar("T")


class Malformed:
    """A request whose bytes are not the method's message: answered INVALID_ARGUMENT, not INTERNAL."""

    def __init__(self, method: str, message_type: str, problem: str) -> None:
        self.method, self.message_type, self.problem = method, message_type, problem
        self.tenant = ""

    def ByteSize(self) -> int:
        return 0


def method_of(request: Message | Malformed, streaming: bool) -> str:
    """The RPC's name, from its request's type (the servicer's methods do not pass it on)."""
    if isinstance(request, Malformed):
        return request.method
    name = type(request).__name__
    if name == "SendMessageRequest":
        return "SendStreamingMessage" if streaming else "SendMessage"
    if name == "TaskPushNotificationConfig":
        return "CreateTaskPushNotificationConfig"
    return name.removesuffix("Request")


class GuardedGrpcHandler(GrpcHandler):
    """Every RPC: the guard chain (`admission.admit`), then the SDK's mapping onto the handler."""

    def __init__(
        self,
        request_handler: RequestHandler,
        guards: Guards,
        *,
        access_log: AccessLog | None = None,
        debug: bool = False,
    ) -> None:
        super().__init__(request_handler)
        self.guards = guards
        self.access_log = access_log
        self.debug = debug

    async def _handle_unary(
        self,
        request: Message,
        context: grpc.aio.ServicerContext,
        handler_func: Callable[[ServerCallContext], Awaitable[T]],
        default_response: T,
    ) -> T:
        rpc = _Rpc(self, request, context, streaming=False)
        rpc.begin()
        failure: BaseException | None = None
        try:
            server_context = await rpc.admit()
            result = await handler_func(server_context)
            await rpc.echo_extensions(server_context)
            return result
        except Exception as exc:
            failure = exc
        finally:
            rpc.end(failure)
        await rpc.abort(failure)
        return default_response

    async def _handle_stream(
        self,
        request: Message,
        context: grpc.aio.ServicerContext,
        handler_func: Callable[[ServerCallContext], AsyncIterable[T]],
    ) -> AsyncIterable[T]:
        rpc = _Rpc(self, request, context, streaming=True)
        rpc.begin()
        failure: BaseException | None = None
        try:
            server_context = await rpc.admit()
            rpc.watch_key()  # a stream outlives its check: it ends when its key or agent does
            first = True
            async for item in handler_func(server_context):
                if first:
                    await rpc.echo_extensions(server_context)
                    first = False
                yield item
        except asyncio.CancelledError:
            if rpc.ended is None or rpc.task is None:
                raise  # the client went away, or the server stops
            rpc.task.uncancel()
            failure = rpc.ended
        except Exception as exc:
            failure = exc
        finally:
            rpc.unwatch_key()
            rpc.end(failure)
        if failure is not None:
            await rpc.abort(failure)


class _Rpc:
    """One call's trace id, span, admission, answer and access line."""

    def __init__(
        self, owner: GuardedGrpcHandler, request: Message | Malformed, context: Any, *, streaming: bool
    ) -> None:
        self.owner, self.request, self.context = owner, request, context
        self.method = method_of(request, streaming)
        self.metadata = metadata_of(context)
        root = owner.guards.root
        self.call: Call = read_call(request, self.metadata, peer_address(context), self.method, root)
        self.scope: dict[str, Any] = {"type": "grpc", "headers": []}
        self.started = time.perf_counter()
        self.status = 200
        self._token: Any = None
        self._span: Any = None
        self._attached: Any = None
        self.task = asyncio.current_task()
        self.ended: RanchError | None = None
        """Why a stream's key or agent ended it (its task is then cancelled, and the call answers this)."""
        self._live: Live | None = None

    def begin(self) -> None:
        trace_id = trace_id_from(self.call.traceparent)
        if tracing.tracer() is not None:
            headers = (
                [(b"traceparent", self.call.traceparent.encode("latin-1"))] if self.call.traceparent else []
            )
            attributes = {"rpc.system": "grpc", "rpc.service": SERVICE, "rpc.method": self.method}
            if self.call.agent_id:
                attributes["ranch.agent"] = self.call.agent_id[: tracing.MAX_VALUE_CHARS]
            parent = tracing.incoming(headers) if headers else None
            self._span = tracing.start(
                f"{SERVICE}/{self.method}", attributes, parent=parent, kind=SpanKind.SERVER
            )
            if self._span is not None:
                trace_id = tracing.trace_id_of(self._span)
                self._attached = tracing.enter(self._span)
        self.scope[TRACE_KEY] = trace_id
        self._token = TRACE_ID.set(trace_id)

    async def admit(self) -> ServerCallContext:
        request = self.request
        if isinstance(request, Malformed):
            raise InvalidInput(
                f"the request is not a valid {request.message_type}: {request.problem}", field="request"
            )
        return await admit(self.owner.guards, self.call, self.metadata, self.scope)

    def watch_key(self) -> None:
        """Register a keyed stream as the HTTP bindings' are (`edge/ending.py`): a revoked or expired
        key, or an agent the caller may no longer reach, ends it with that error."""
        security, known = self.owner.guards.security, self.call.known
        if not security.enabled or known is None:
            return

        def end(reason: RanchError) -> None:
            if self.ended is None and self.task is not None:
                self.ended = reason
                self.task.cancel()

        bound = Bound(self.call.agent_id, known.principal, end)
        self._live = security.live.open(known.key_id, known.expires_at, end, bound)

    def unwatch_key(self) -> None:
        if self._live is not None:
            self.owner.guards.security.live.close(self._live)
            self._live = None

    async def echo_extensions(self, server_context: ServerCallContext) -> None:
        """The extensions the handler activated, in the response's `a2a-extensions` metadata."""
        activated = server_context.state.get(SCOPE_KEY, {}).get("activated")
        if activated:
            await self.context.send_initial_metadata(((EXTENSIONS_METADATA, ",".join(activated)),))

    def end(self, failure: BaseException | None) -> None:
        if failure is not None:
            self.status = http_status_for(failure)
        if self._attached is not None:
            tracing.detach(self._attached)
        if self._span is not None:
            if self.status >= 500:
                self._span.set_status(Status(StatusCode.ERROR, f"gRPC {self.method} failed"))
            self._span.end()
        try:
            TRACE_ID.reset(self._token)
        except ValueError:  # a stream's last step ran in another context: nothing to restore there
            pass
        if metrics.enabled():
            metrics.request("a2a", "POST", self.status)
            if isinstance(failure, RateLimited):
                metrics.rate_limited(failure.key.partition(":")[0])
        log = self.owner.access_log
        if log is not None:
            path = f"/{SERVICE}/{self.method}"
            seconds = time.perf_counter() - self.started
            log("GRPC", path, b"", self.status, seconds, self.scope[TRACE_KEY], self.call.client)

    async def abort(self, failure: BaseException | None) -> None:
        """Answer `failure` as the table's gRPC status (aborting the call raises)."""
        if failure is None:
            return
        error: BaseException = failure
        if not isinstance(failure, RanchError):
            down = unavailable(failure, f"gRPC {self.method}")
            if down is not None:
                error = down
            elif not isinstance(failure, A2AError):
                logger.error("gRPC %s failed", self.method, exc_info=failure)
        code, message, trailing = rich_status(error, debug=self.owner.debug)
        self.context.set_trailing_metadata(trailing)
        await self.context.abort(code, message)
