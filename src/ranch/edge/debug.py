"""Debug mode's request log: each request's body, its answer (the first 4 KB of each) and timing.

`DebugTap` sits between the server and whichever road a request takes (it reads ASGI
messages, not a `Request`), so the fast path keeps its road in debug mode too. The records
are scrubbed like every other (`policy/logs.py`).
"""

from __future__ import annotations

import logging
import time

from starlette.types import Message, Receive, Send

logger = logging.getLogger("ranch.requests")
DEBUG_BODY_BYTES = 4096
"""Debug mode logs at most this much of each request and answer body (and the size of the rest)."""


class DebugTap:
    """One request's `receive` and `send`, keeping the start of each body; `done` logs the answer."""

    def __init__(self, method: str, path: str, receive: Receive, send: Send) -> None:
        self.method, self.path = method, path
        self._receive, self._send = receive, send
        self._asked = _Kept()
        self._answered = _Kept()
        self._logged = False
        self._status = 0
        self._streamed = False
        self._started = time.perf_counter()

    async def receive(self) -> Message:
        message = await self._receive()
        if message["type"] == "http.request" and not self._logged:
            self._asked.add(message.get("body", b""))
            if not message.get("more_body", False):
                self._log_request()
        return message

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self._status = message["status"]
            self._streamed = any(
                name == b"content-type" and value.startswith(b"text/event-stream")
                for name, value in message.get("headers", [])
            )
        elif message["type"] == "http.response.body":
            self._answered.add(message.get("body", b""))
        await self._send(message)

    def done(self) -> None:
        if not self._logged:
            self._log_request()
        elapsed = (time.perf_counter() - self._started) * 1000
        shown = "(streamed)" if self._streamed else self._answered.shown()
        logger.debug(
            "answered %s in %.2f ms: %s", self._status, elapsed, shown, extra={"duration_ms": elapsed}
        )

    def _log_request(self) -> None:
        self._logged = True
        logger.debug("%s %s %s", self.method, self.path, self._asked.shown())


class _Kept:
    """The first `DEBUG_BODY_BYTES` of a body, and its whole size."""

    def __init__(self) -> None:
        self.head = b""
        self.size = 0

    def add(self, chunk: bytes) -> None:
        if len(self.head) < DEBUG_BODY_BYTES:
            self.head += chunk[: DEBUG_BODY_BYTES - len(self.head)]
        self.size += len(chunk)

    def shown(self) -> str:
        text = self.head.decode(errors="replace")
        left_out = self.size - DEBUG_BODY_BYTES
        return text if left_out <= 0 else f"{text}…[truncated {left_out} bytes]"
