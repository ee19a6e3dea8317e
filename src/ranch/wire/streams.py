"""Event streams whose status line waits for their first event.

An SSE response sends `200 text/event-stream` and its headers before its generator runs. An
error the generator raises before its first event (a malformed message, an unknown task) then
cuts a 200 short, and headers the handler decides while starting (`A2A-Extensions`) come too
late. The a2a-sdk's 1.0 bindings and ranch's lean JSON-RPC binding fetch the first event before
they answer for this reason; the SDK's 0.3 adapters do not, so ranch holds their streams here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

Refusal = Callable[[Exception], Awaitable[Response]]
"""The error response for an exception raised before a stream's first event."""


class HeldStream(Response):
    """`stream`, with its `http.response.start` held until its first body message.

    Until then nothing has reached the client, so an exception answers with `refuse(exc)`
    instead; after it, the stream is the client's and an exception ends it as before.
    Headers set on this response (a trace id) are the stream's own.
    """

    def __init__(self, stream: Response, refuse: Refusal) -> None:  # no super().__init__: no body
        self.stream = stream
        self.refuse = refuse
        self.status_code = stream.status_code
        self.raw_headers = stream.raw_headers  # one list: headers set here go out with the stream
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start: Message | None = None
        started = False

        async def held(message: Message) -> None:
            nonlocal start, started
            if not started and message["type"] == "http.response.start":
                start = message
                return
            if not started and start is not None:
                started = True
                await send(start)
            await send(message)

        try:
            await self.stream(scope, receive, held)
        except Exception as exc:
            if started:
                raise
            await (await self.refuse(exc))(scope, receive, send)
