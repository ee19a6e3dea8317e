"""Event streams that end when their key is revoked or expires, or their agent is removed.

An A2A stream (SendStreamingMessage, SubscribeToTask, on JSON-RPC or HTTP+JSON, 1.0 or 0.3) or an
`/mcp` answer streamed as SSE outlives the check its request passed. `KeyedStream` wraps such a
request's `send`. Before the request is answered it is registered with its key as the guard chain
knew it (`identity/live.py`), and an A2A stream with its agent and caller too, so a revocation
(on any replica) or the key's `expires_at` is heard from then on, while the stream opens too (its
status line waits for its first event, `wire/streams.py`). A key that ended while the stream opened
refuses it when it starts: the binding's authentication error (401, JSON-RPC with the request's id),
as a new call gets, never a 500. Once the stream has started, its answer is cancelled, nothing it
sends after that goes out, and the stream ends with the binding's authentication error event. When
its agent is removed or the caller may no longer reach it, it ends so with AgentNotFound. An answer
that turns out not to be a stream is sent whole: only a stream outlives its check. Requests that
cannot stream are not wrapped (`may_stream`), so a plain SendMessage pays nothing; the fast path
hands its stream over once the first event is ready, and the key is asked for again then if the
chain's cache has forgotten it meanwhile (revoked, expired).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import orjson
from starlette.types import Message, Receive, Send

from ranch.db.engine import unavailable
from ranch.edge.guards import Call, Entry, refusal, request_id_of
from ranch.exceptions import RanchError
from ranch.identity.live import Bound, Live
from ranch.identity.security import Security
from ranch.wire.errors import a2a_rest_error_body, jsonrpc_error_body

TRACE_HEADER = b"x-trace-id"
STREAM_PATHS = (":stream", ":subscribe")
"""How the HTTP+JSON bindings' streaming routes end (`/message:stream`, `/tasks/{id}:subscribe`)."""


def may_stream(call: Call, security: Security) -> bool:
    """Whether the request, keyed, may be answered with a stream: a JSON-RPC call (the method is in
    the body), an HTTP+JSON streaming route, or `/mcp`."""
    if call.key is None or not security.enabled:
        return False
    if call.entry is Entry.MCP or (call.entry is Entry.A2A and call.jsonrpc):
        return True
    return call.entry is Entry.A2A and call.path.endswith(STREAM_PATHS)


class KeyedStream:
    """The `send` of one keyed request that may stream; `run` serves it, ending it as its key ends."""

    def __init__(self, call: Call, security: Security, send: Send, request_id: Any = None) -> None:
        self._call = call
        self._security = security
        self._send = send
        self._request_id = request_id
        self._scope = anyio.CancelScope()
        self._live: Live | None = None
        self._ended: RanchError | None = None
        self._started = False
        self._finished = False
        self._kept: list[tuple[bytes, bytes]] = []
        """The headers of a stream refused as it started that its refusal keeps (its trace id)."""

    async def run(self, answer: Callable[[Send], Awaitable[None]]) -> None:
        """`answer(send)` with this as its `send`; the error response or event (authentication, or
        AgentNotFound) when the key or the agent ended the stream."""
        try:
            await self._open()
            with self._scope:
                await answer(self)
        finally:
            self._let_go()
        if self._ended is None or self._finished:
            return
        self._finished = True
        if not self._started:  # nothing was sent: refused as a new call is
            await self._refuse(self._ended)
            return
        event = b"event: " + self._event_name() + b"\r\ndata: " + self._error() + b"\r\n\r\n"
        await self._send({"type": "http.response.body", "body": event, "more_body": False})

    def reading(self, receive: Receive) -> Receive:
        """`receive`, noting the JSON-RPC id of the request's body as it is read, so that an error
        ending the stream before its first event answers the request's own id."""
        chunks: list[bytes] = []

        async def noted() -> Message:
            message = await receive()
            if message["type"] == "http.request" and self._request_id is None and self._call.jsonrpc:
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    self._request_id = request_id_of(b"".join(chunks))
                    chunks.clear()
            return message

        return noted

    async def __call__(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            if not _event_stream(message):
                self._let_go()  # an answer that is no stream is sent whole, whatever its key became
                self._ended = None
            elif self._ended is not None:  # its key ended while it opened: refused instead (`run`)
                self._kept = [(name, value) for name, value in message["headers"] if name == TRACE_HEADER]
                self._scope.cancel()
                return
            self._started = True
        elif self._ended is not None:
            return  # checked as it is sent: nothing of the stream goes out once its key ended
        elif kind == "http.response.body" and self._live is not None:
            if self._request_id is None and self._call.jsonrpc:
                self._request_id = _request_id_in(message.get("body", b""))
            self._finished = not message.get("more_body", False)
        await self._send(message)

    async def _open(self) -> None:
        """Register with the key the guard chain let the request in with: from now on its end is
        heard. A key the cache has forgotten since (revoked or expired meanwhile: the fast path
        hands its stream over once its first event is ready) is asked for again, and one that no
        longer stands ends the stream before it starts."""
        call, security = self._call, self._security
        known = call.known
        assert known is not None and call.key is not None  # `may_stream`: keyed, and the chain let it in
        bound = Bound(call.agent_id, known.principal, self._end) if call.agent_id else None  # /mcp names none
        self._live = security.live.open(known.key_id, known.expires_at, self._end, bound)
        if security.keys.cached(call.key) is not None:
            return
        try:
            await security.keys.known(call.key, call.client)
        except RanchError as error:
            self._end(error)
        except Exception as exc:  # the database is out: 503, as the guard chain answers it
            failure = unavailable(exc, f"{call.method} {call.path}")
            if failure is None:
                raise
            self._end(failure)

    def _end(self, reason: RanchError) -> None:
        self._ended = reason
        if self._started:  # before, the answer goes on: a stream is refused as it starts
            self._scope.cancel()

    def _let_go(self) -> None:
        if self._live is not None:
            self._security.live.close(self._live)
            self._live = None

    async def _refuse(self, error: RanchError) -> None:
        response = refusal(self._call, error, self._request_id)
        status, headers = response.status_code, [*response.raw_headers, *self._kept]
        await self._send({"type": "http.response.start", "status": status, "headers": headers})
        await self._send({"type": "http.response.body", "body": response.body, "more_body": False})

    def _event_name(self) -> bytes:
        """`error`, as the A2A bindings name an error in a stream; an MCP client reads `message`s."""
        return b"message" if self._call.entry is Entry.MCP else b"error"

    def _error(self) -> bytes:
        assert self._ended is not None
        if self._call.jsonrpc:
            return orjson.dumps(jsonrpc_error_body(self._ended, self._request_id))
        return orjson.dumps(a2a_rest_error_body(self._ended))


def _event_stream(message: Message) -> bool:
    for name, value in message.get("headers", ()):
        if name.lower() == b"content-type":
            return bytes(value).startswith(b"text/event-stream")
    return False


def _request_id_in(chunk: bytes) -> Any:
    """The JSON-RPC id a stream's events carry (each is a response to the request), if this chunk
    holds one."""
    for line in chunk.splitlines():
        if line.startswith(b"data:"):
            found = request_id_of(line[5:].strip())
            if found is not None:
                return found
    return None
