"""The shortest road for the commonest request: an A2A 1.0 JSON-RPC call to a known agent.

Starlette's middleware stack, router, `Request` and `Response` objects cost more than
the A2A work of a SendMessage to an echo agent (bench/README.md). `FastPathApp` takes
a POST to `/a2a/agents/{id}` with `A2A-Version: 1.x`, a Content-Length within the
limit and no `A2A-Extensions`, reads its body from ASGI and hands it to a `Lean`
callable, which answers with JSON bytes (sent as two ASGI messages) or a Response
(streams, errors with headers). Everything else (unknown agents, 0.3, extension
negotiation, oversized or chunked bodies, or a `Lean` that answers `None`) takes
the full stack, which answers it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Container
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

PREFIX = "/a2a/agents/"
JSON_TYPE = (b"content-type", b"application/json")


@dataclass(frozen=True, slots=True)
class Head:
    """What the fast path read off a request's line and headers."""

    agent_id: str
    traceparent: str | None


@dataclass(frozen=True, slots=True)
class Answer:
    """A plain JSON answer and the extra headers it goes out with."""

    body: bytes
    headers: list[tuple[bytes, bytes]]


Lean = Callable[[Head, Scope, bytes], Awaitable[Answer | Response | None]]
"""Answers a fast request from its head and body; None sends it down the full stack."""


class FastPathApp(Starlette):
    """A Starlette app whose plain A2A 1.0 JSON-RPC calls skip the middleware stack and router."""

    def __init__(self, *, lean: Lean | None, agents: Container[str], max_body: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._lean = lean
        self._agents = agents
        self._max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        head = self._fast_head(scope) if self._lean is not None else None
        if head is None:
            await super().__call__(scope, receive, send)
            return
        assert self._lean is not None
        body = await _read_body(receive)
        if body is None:
            return  # the client went away before sending its body
        answer = await self._lean(head, scope, body)
        if answer is None:
            await super().__call__(scope, replay(body, receive), send)
        elif isinstance(answer, Answer):
            headers = [JSON_TYPE, (b"content-length", b"%d" % len(answer.body)), *answer.headers]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": answer.body})
        else:
            await answer(scope, receive, send)

    def _fast_head(self, scope: Scope) -> Head | None:
        if scope["type"] != "http" or scope["method"] != "POST" or not scope["path"].startswith(PREFIX):
            return None
        agent_id = scope["path"][len(PREFIX) :].removesuffix("/")
        if not agent_id or "/" in agent_id or agent_id not in self._agents:
            return None
        version = length = traceparent = None
        for name, value in scope["headers"]:
            if name == b"a2a-version":
                version = value
            elif name == b"content-length":
                length = value
            elif name == b"traceparent":
                traceparent = value.decode("latin-1")
            elif name == b"a2a-extensions":
                return None  # the full stack echoes activated extensions
        if version is None or not version.startswith(b"1") or length is None or not length.isdigit():
            return None
        return Head(agent_id, traceparent) if int(length) <= self._max_body else None


async def _read_body(receive: Receive) -> bytes | None:
    message = await receive()
    body: bytes = message.get("body", b"")
    while message.get("more_body", False):
        message = await receive()
        body += message.get("body", b"")
    return None if message["type"] == "http.disconnect" else body


def replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives `body` once, then whatever the connection says next."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed
