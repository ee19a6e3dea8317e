"""The shortest road for the commonest request: an A2A 1.0 JSON-RPC call, answered from ASGI.

Starlette's middleware stack, router, `Request` and `Response` objects cost more than
the A2A work of a SendMessage to an echo agent (bench/README.md). A `FastHandler` takes
the body of a POST read straight from ASGI and answers with JSON bytes, sent here as two
ASGI messages, or with a Response (streams, errors with headers); `None` hands the
request to the full stack, its body replayed. Which requests may take this road is the
edge's decision (`ranch.edge`), made after its guards ran.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from ranch.exceptions import BodyTooLarge

JSON_TYPE = (b"content-type", b"application/json")

FastHandler = Callable[[str, Scope, bytes], Awaitable[bytes | Response | None]]
"""(agent id, scope, body) -> JSON bytes, a Response, or None for the full stack."""


async def send_json(send: Send, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    """A 200 JSON answer as two ASGI messages, with `headers` after its type and length."""
    start = [JSON_TYPE, (b"content-length", b"%d" % len(body)), *headers]
    await send({"type": "http.response.start", "status": 200, "headers": start})
    await send({"type": "http.response.body", "body": body})


async def read_body(receive: Receive, limit: int | None = None) -> bytes | None:
    """The request's whole body; None if the client went away first. Past `limit` bytes it stops
    reading and raises BodyTooLarge (for bodies sent without a Content-Length)."""
    message = await receive()
    body: bytes = message.get("body", b"")
    while message.get("more_body", False):
        message = await receive()
        body += message.get("body", b"")
        if limit is not None and len(body) > limit:
            raise BodyTooLarge(len(body), limit)
    if message["type"] == "http.disconnect":
        return None
    if limit is not None and len(body) > limit:
        raise BodyTooLarge(len(body), limit)
    return body


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
