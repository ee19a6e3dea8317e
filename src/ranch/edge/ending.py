"""Event streams that end when their key is revoked or expires, or their agent is removed.

An A2A stream (SendStreamingMessage, SubscribeToTask, on JSON-RPC or HTTP+JSON, 1.0 or 0.3) or an
`/mcp` answer streamed as SSE outlives the check its request passed. `KeyedStream` wraps such a
request's `send`: once the answer starts as `text/event-stream`, the stream is registered with
the key (`identity/live.py`), and an A2A stream with its agent and caller too; when the key is
revoked (on any replica) or its `expires_at` passes, the answer is cancelled, nothing it sends
after that goes out, and the stream ends with the binding's authentication error event. When its
agent is removed or the caller may no longer reach it, it ends so with AgentNotFound. Requests
that cannot stream are not wrapped (`may_stream`), so a plain SendMessage pays nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import orjson
from starlette.types import Message, Receive, Send

from ranch.edge.guards import Call, Entry, request_id_of
from ranch.exceptions import RanchError
from ranch.identity.live import Bound, Live
from ranch.identity.security import Security
from ranch.wire.errors import a2a_rest_error_body, jsonrpc_error_body

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
        self._finished = False

    async def run(self, answer: Callable[[Send], Awaitable[None]]) -> None:
        """`answer(send)` with this as its `send`; the error event (authentication, or AgentNotFound)
        when the key or the agent ended the stream."""
        try:
            with self._scope:
                await answer(self)
        finally:
            if self._live is not None:
                self._security.live.close(self._live)
        if self._ended is not None and not self._finished:
            self._finished = True
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
        if self._ended is not None:
            return  # checked as it is sent: nothing of the stream goes out once its key ended
        kind = message["type"]
        if kind == "http.response.start" and _event_stream(message):
            await self._register()
        elif kind == "http.response.body" and self._live is not None:
            if self._request_id is None and self._call.jsonrpc:
                self._request_id = _request_id_in(message.get("body", b""))
            self._finished = not message.get("more_body", False)
        await self._send(message)

    async def _register(self) -> None:
        keys, key = self._security.keys, self._call.key
        assert key is not None  # `may_stream`
        known = keys.cached(key) or await keys.known(key, self._call.client)
        agent_id = self._call.agent_id  # /mcp names none: it asks each agent as it goes
        bound = Bound(agent_id, known.principal, self._end) if agent_id else None
        self._live = self._security.live.open(known.key_id, known.expires_at, self._end, bound)

    def _end(self, reason: RanchError) -> None:
        self._ended = reason
        self._scope.cancel()

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
